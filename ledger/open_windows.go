//go:build windows

package ledger

import (
	"fmt"
	"os"
)

// openNoFollow opens path for reading unless it is a symbolic link or
// another reparse point. Windows has no O_NOFOLLOW; the check and the open
// are two steps, which is acceptable for a folder only its user writes.
func openNoFollow(path string) (*os.File, error) {
	if err := refuseLink(path); err != nil {
		return nil, err
	}
	return os.Open(path)
}

func appendNoFollow(path string) (*os.File, error) {
	if err := refuseLink(path); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

func refuseLink(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil // let the open report it
	}
	if fi.Mode()&(os.ModeSymlink|os.ModeIrregular) != 0 {
		return fmt.Errorf("%s is a symbolic link or reparse point: not followed", path)
	}
	return nil
}
