//go:build darwin

package proctree

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// End cannot prove, on macOS, which process a signal from outside its
// parent would reach (no pidfd, no readable environment of another
// process): nothing is signalled, and the result says so.
func End(s Scope, grace time.Duration, byHand bool) Result {
	return Result{Unproven: ErrUnsupported}
}

// Now is 0 here: no process's start is read.
func Now() uint64 { return 0 }

// EndGroup ends process group pgid from the process whose unreaped child
// leads it: SIGTERM, up to grace, SIGKILL. Escaped processes are not
// looked for on macOS.
func EndGroup(pgid int, mark string, grace time.Duration) Result {
	var res Result
	if pgid <= 1 || pgid == unix.Getpgrp() {
		res.Unproven = errors.New("process group is this process's own, or not a group: never signalled")
		return res
	}
	if live(pgid) == 0 {
		return res
	}
	unix.Kill(-pgid, unix.SIGTERM)
	deadline := time.Now().Add(grace)
	for live(pgid) > 0 && time.Now().Before(deadline) {
		time.Sleep(pollEvery)
	}
	if live(pgid) > 0 {
		unix.Kill(-pgid, unix.SIGKILL)
		deadline = time.Now().Add(time.Second)
		for live(pgid) > 0 && time.Now().Before(deadline) {
			time.Sleep(pollEvery)
		}
	}
	if n := live(pgid); n > 0 {
		res.Left = append(res.Left, Proc{PID: pgid, Why: "members of the group outlived SIGKILL"})
	}
	return res
}

// live counts the group's members that are not zombies.
func live(pgid int) int {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range procs {
		if p.Proc.P_stat != 5 { // SZOMB
			n++
		}
	}
	return n
}

// Live is not available on macOS.
func Live(want func(string) bool) []int { return nil }

// Hold cannot pin a process here.
func (c *Command) Hold() bool { return false }

// Release does nothing here.
func (c *Command) Release() { c.held = held{} }

// held is empty here: nothing can be held.
type held struct{}
