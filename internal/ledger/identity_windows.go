package ledger

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/windows"
)

func hostBootID() string       { return "" }
func hostPidNamespace() string { return "" }
func bootTime() time.Time      { return time.Time{} }

const stillActive = 259 // STILL_ACTIVE, the exit code of a running process

func lookupProc(pid int) (procState, error) {
	if pid <= 0 {
		return procState{}, nil
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		if errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
			return procState{}, nil
		}
		if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
			return procState{exists: true, unknown: "access denied to process " + fmt.Sprint(pid)}, nil
		}
		return procState{}, fmt.Errorf("open process %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err == nil && code != stillActive {
		return procState{exists: true, exited: true}, nil
	}
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return procState{exists: true, unknown: "GetProcessTimes: " + err.Error()}, nil
	}
	ticks := uint64(created.HighDateTime)<<32 | uint64(created.LowDateTime)
	return procState{
		exists: true,
		start:  time.Unix(0, created.Nanoseconds()).Truncate(time.Millisecond),
		ticks:  ticks,
	}, nil
}

// There are no pid namespaces here.
func inInitialPidNamespace() bool { return true }

func lookupInNamespace(ns string, pid int) (procState, bool, error) {
	return procState{}, false, errors.New("pid namespaces exist on Linux only")
}
