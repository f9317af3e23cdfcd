//go:build !linux && !darwin

package proctree

import "time"

// End cannot prove, on this system, which process a signal from outside
// its parent would reach: nothing is signalled.
func End(s Scope, grace time.Duration, byHand bool) Result {
	return Result{Unproven: ErrUnsupported}
}

// Now is 0 here: no process's start is read.
func Now() uint64 { return 0 }

// EndGroup is not offered here: on Windows a Job Object holds the tree.
func EndGroup(pgid int, mark string, grace time.Duration) Result {
	return Result{Unproven: ErrUnsupported}
}

// Live is not available here.
func Live(want func(string) bool) []int { return nil }

// SessionID is 0 here.
func SessionID() int { return 0 }

// Hold cannot pin a process here.
func (c *Command) Hold() bool { return false }

// Release does nothing here.
func (c *Command) Release() { c.held = held{} }

// held is empty here: nothing can be held.
type held struct{}
