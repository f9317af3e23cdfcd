//go:build !linux && !darwin && !windows

package ledger

import (
	"errors"
	"os"
	"time"
)

// readTime: read times are not looked at on this system; an adoption by
// another member is not seen here.
func readTime(os.FileInfo) (time.Time, bool) { return time.Time{}, false }

func openNoATime(path string) (*os.File, error) { return openNoFollow(path) }

func armFile(string) error { return errors.ErrUnsupported }
