//go:build unix

package sandboxtest

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// removeStaleGuardDirs deletes the proxy folders that test binaries
// killed with GuardAll on left in tmp: folders of this user's alone whose
// socket, a minute old or more, no process listens on any longer (a
// connection to it is refused), and empty ones an hour old (a start killed before it bound
// its socket). Whether a proxy lives is asked of its socket, not of a
// pid: a process in another pid namespace sharing tmp is judged right.
// Anything else — another user's folder, one with other files, a socket
// that answers or cannot be tried — is left.
func removeStaleGuardDirs(tmp string, now time.Time) (removed int) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	uid := os.Getuid()
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), guardDirPrefix) || !e.IsDir() {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) != uid {
			continue
		}
		inside, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		switch {
		case len(inside) == 0:
			if now.Sub(fi.ModTime()) > time.Hour && os.Remove(dir) == nil {
				removed++
			}
		case len(inside) == 1 && inside[0].Type()&os.ModeSocket != 0:
			sock := filepath.Join(dir, inside[0].Name())
			// A proxy binds its socket, then listens: in between, a
			// connection is refused too. A socket a minute old is past
			// that.
			if si, err := os.Lstat(sock); err != nil || now.Sub(si.ModTime()) < time.Minute {
				continue
			}
			if !refused(sock) {
				continue
			}
			if os.Remove(sock) == nil && os.Remove(dir) == nil {
				removed++
			}
		}
	}
	return removed
}

// refused reports whether a connection to the unix socket at path is
// refused: no process listens on it.
func refused(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
