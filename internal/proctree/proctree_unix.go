//go:build linux || darwin

package proctree

import (
	"time"

	"golang.org/x/sys/unix"
)

// pollEvery is how often a wait for processes to go looks again.
const pollEvery = 10 * time.Millisecond

// SessionID is this process's session: 0 where its leader is outside
// this pid namespace, which is a real answer (see sessionOfMark).
// getsid of the calling process does not fail (its errors are for other
// pids); were it to, 0 is what is returned.
func SessionID() int {
	sid, err := unix.Getsid(0)
	if err != nil {
		return 0
	}
	return sid
}
