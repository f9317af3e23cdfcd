// Package procid learns what identifies a process on this machine, so that
// a record of it can be recognised later: its pid and start (the exact
// platform ticks where there are some), the boot it runs in, and its pid
// namespace. It is the ground the ledger's judge stands on; it knows
// nothing of records, runs or the ledger, and must never call a process
// that may run gone: what it cannot learn it says (State.Unknown).
package procid

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
	// StartTicks is the exact platform start time: clock ticks since boot
	// on Linux, microseconds since the epoch on macOS, 100 ns units since
	// 1601 on Windows; zero when unknown.
	StartTicks   uint64
	BootID       string
	PidNamespace string
}

// State is what the platform tells of a pid, now.
type State struct {
	// Exists: some process, live or exited, holds the pid.
	Exists bool
	// Exited: the pid is taken by a process that has already exited (a
	// zombie waiting for its parent, or a Windows process object kept
	// open).
	Exited bool
	// Start is its start, to the millisecond, and Ticks the exact platform
	// start (Identity.StartTicks); zero when unknown.
	Start time.Time
	Ticks uint64
	// Unknown says why Start and Ticks are missing for a live pid.
	Unknown string
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
// package was initialised, well within the family's 2 s window of the real
// start. A record with no start would be judged dead by the other members
// while this process lives.
func Self() (Identity, error) {
	selfOnce.Do(func() {
		pid := os.Getpid()
		st, err := Proc(pid)
		if err != nil {
			selfErr = err
			return
		}
		start := st.Start
		if start.IsZero() {
			start = initTime.Round(0).UTC().Truncate(time.Millisecond)
		}
		self = Identity{PID: pid, Start: start, StartTicks: st.Ticks, BootID: hostBootID(), PidNamespace: hostPidNamespace()}
	})
	return self, selfErr
}

// Lookup learns the identity of a live process; ok is false when no live
// process has that pid.
func Lookup(pid int) (id Identity, ok bool, err error) {
	st, err := Proc(pid)
	if err != nil || !st.Exists || st.Exited {
		return Identity{}, false, err
	}
	return Identity{PID: pid, Start: st.Start, StartTicks: st.Ticks, BootID: hostBootID(), PidNamespace: hostPidNamespace()}, true, nil
}
