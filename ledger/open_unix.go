//go:build unix

package ledger

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// openNoFollow opens path for reading without following a symbolic link in
// its last element: a link there is an error, decided by the kernel, so
// there is no window between a check and the open.
func openNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil && errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: not followed", path)
	}
	return f, err
}

// appendNoFollow opens path for appending, creating it with mode 0600.
func appendNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil && errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: refusing to write through it", path)
	}
	return f, err
}
