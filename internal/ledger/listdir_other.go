//go:build !linux

package ledger

import (
	"errors"
	"io"
	"os"
)

// readDirNames lists the folder open as f. Inode numbers are not read
// here: runs are then walked in run id order.
func readDirNames(f *os.File) (names []string, inos []uint64, err error) {
	names, err = f.Readdirnames(-1)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, nil, err
}
