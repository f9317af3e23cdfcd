package ledger

import (
	"os"
	"sync"
	"time"
)

// Identity is what the ledger records about a process to recognise it
// later: its pid, when it started, and the boot and pid namespace the pid
// belongs to.
type Identity struct {
	PID int
	// Start is the process's start time, to the millisecond; zero when it
	// could not be learnt (never for Self).
	Start time.Time
	// StartTicks is the exact platform start time (see Record.StartTicks);
	// zero when unknown.
	StartTicks   uint64
	BootID       string
	PidNamespace string
}

// procState is what the platform code learns about a pid.
type procState struct {
	exists bool
	// exited: the pid is taken by a process that has already exited (a
	// zombie waiting for its parent, or a Windows process object kept open).
	exited bool
	start  time.Time
	ticks  uint64
	// unknown says why start and ticks are missing for a live pid.
	unknown string
}

var (
	selfOnce sync.Once
	self     Identity
	selfErr  error
)

// initTime is when this package was initialised, a few milliseconds after
// the process started: its start where the platform cannot tell it.
var initTime = time.Now()

// Self returns this process's identity, learnt once. Its Start is never
// zero: where the platform cannot tell it (no /proc), it is when this
// package was initialised, well within StartWindow of the real start. A
// record with no start would be judged dead by the other members while
// this process lives.
func Self() (Identity, error) {
	selfOnce.Do(func() {
		pid := os.Getpid()
		st, err := lookupProc(pid)
		if err != nil {
			selfErr = err
			return
		}
		start := st.start
		if start.IsZero() {
			start = initTime.Round(0).UTC().Truncate(time.Millisecond)
		}
		self = Identity{PID: pid, Start: start, StartTicks: st.ticks, BootID: hostBootID(), PidNamespace: hostPidNamespace()}
	})
	return self, selfErr
}

// Lookup learns the identity of a live process; ok is false when no live
// process has that pid.
func Lookup(pid int) (id Identity, ok bool, err error) {
	st, err := lookupProc(pid)
	if err != nil || !st.exists || st.exited {
		return Identity{}, false, err
	}
	return Identity{PID: pid, Start: st.start, StartTicks: st.ticks, BootID: hostBootID(), PidNamespace: hostPidNamespace()}, true, nil
}
