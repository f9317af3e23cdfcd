//go:build !linux && !darwin && !windows

package ledger

import (
	"errors"
	"time"
)

func hostBootID() string       { return "" }
func hostPidNamespace() string { return "" }
func bootTime() time.Time      { return time.Time{} }

func lookupProc(pid int) (procState, error) {
	if pid <= 0 {
		return procState{}, nil
	}
	return procState{exists: true, unknown: "process lookup is not implemented on this system"}, nil
}

// There are no pid namespaces here.
func inInitialPidNamespace() bool { return true }

func lookupInNamespace(ns string, pid int) (procState, bool, error) {
	return procState{}, false, errors.New("pid namespaces exist on Linux only")
}
