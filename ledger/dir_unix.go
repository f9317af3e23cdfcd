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
	perm := fi.Mode().Perm()
	if perm&0o002 != 0 {
		return &UnsafeDirError{Path: p, Why: fmt.Sprintf("mode %04o: writable by everyone", perm)}
	}
	if perm&0o020 != 0 {
		// Under umask 002 (each user with a private group, as Debian and
		// Ubuntu make them) every member creates group-writable folders
		// and files. They are the user's alone when the group is: the
		// rule of Debian's ssh for ~/.ssh, which covers what is inside.
		if alone, why := groupOwnersAlone(st.Gid, st.Uid); !alone {
			return &UnsafeDirError{Path: p, Why: fmt.Sprintf("mode %04o: writable by its group, gid %d, which is not yours alone: %s", perm, st.Gid, why)}
		}
	}
	return nil
}
