package ledger

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// readTime is fi's last-access time, which NTFS updates an hour late at
// best, and not at all where last-access updates are off (the default on
// most volumes): ReuseReadsRecorded finds out.
func readTime(fi os.FileInfo) (time.Time, bool) {
	d, ok := fi.Sys().(*syscall.Win32FileAttributeData)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, d.LastAccessTime.Nanoseconds()), true
}

func openNoATime(path string) (*os.File, error) { return openNoFollow(path) }

// armFile is not done on Windows: a read seen once stays seen, which
// only keeps a keep-alive longer.
func armFile(string) error { return errors.ErrUnsupported }
