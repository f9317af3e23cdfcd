//go:build unix

package ledger

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

func checkOwner(p string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if me := os.Geteuid(); int(st.Uid) != me {
		return &UnsafeDirError{Path: p, Why: fmt.Sprintf("owned by uid %d, and this process runs as uid %d", st.Uid, me)}
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return &UnsafeDirError{Path: p, Why: fmt.Sprintf("mode %04o: writable by its group or by everyone", perm)}
	}
	return nil
}
