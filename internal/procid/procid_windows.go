package procid

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/windows"
)

func hostBootID() string       { return "" }
func hostPidNamespace() string { return "" }

// BootTime is when this boot began, or the zero time when unknown.
func BootTime() time.Time { return time.Time{} }

const stillActive = 259 // STILL_ACTIVE, the exit code of a running process

// Proc tells what the platform knows of pid now: no process, an exited
// one, or a live one and its start.
func Proc(pid int) (State, error) {
	if pid <= 0 {
		return State{}, nil
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		if errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
			return State{}, nil
		}
		if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
			return State{Exists: true, Unknown: "access denied to process " + fmt.Sprint(pid)}, nil
		}
		return State{}, fmt.Errorf("open process %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err == nil && code != stillActive {
		return State{Exists: true, Exited: true}, nil
	}
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return State{Exists: true, Unknown: "GetProcessTimes: " + err.Error()}, nil
	}
	ticks := uint64(created.HighDateTime)<<32 | uint64(created.LowDateTime)
	return State{
		Exists: true,
		Start:  time.Unix(0, created.Nanoseconds()).Truncate(time.Millisecond),
		Ticks:  ticks,
	}, nil
}

// InInitialPidNamespace is true: there are no pid namespaces here.
func InInitialPidNamespace() bool { return true }

// InNamespace fails: there are no pid namespaces here.
func InNamespace(ns string, pid int) (State, bool, error) {
	return State{}, false, errors.New("pid namespaces exist on Linux only")
}
