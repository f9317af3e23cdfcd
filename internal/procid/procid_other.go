//go:build !linux && !darwin && !windows

package procid

import (
	"errors"
	"time"
)

func hostBootID() string       { return "" }
func hostPidNamespace() string { return "" }

// BootTime is when this boot began, or the zero time when unknown.
func BootTime() time.Time { return time.Time{} }

// Proc tells what the platform knows of pid now: no process, an exited
// one, or a live one and its start.
func Proc(pid int) (State, error) {
	if pid <= 0 {
		return State{}, nil
	}
	return State{Exists: true, Unknown: "process lookup is not implemented on this system"}, nil
}

// InInitialPidNamespace is true: there are no pid namespaces here.
func InInitialPidNamespace() bool { return true }

// InNamespace fails: there are no pid namespaces here.
func InNamespace(ns string, pid int) (State, bool, error) {
	return State{}, false, errors.New("pid namespaces exist on Linux only")
}
