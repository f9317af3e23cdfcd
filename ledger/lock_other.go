//go:build !windows && (!unix || solaris || aix)

package ledger

import (
	"errors"
	"os"
)

func lockFile(f *os.File, _ bool) (bool, error) {
	return false, &os.PathError{Op: "lock", Path: f.Name(), Err: errors.ErrUnsupported}
}

func unlockFile(*os.File) error { return nil }
