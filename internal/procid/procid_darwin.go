package procid

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var (
	hostOnce sync.Once
	bootID   string
	bootAt   time.Time
)

func loadHost() {
	hostOnce.Do(func() {
		if s, err := unix.Sysctl("kern.bootsessionuuid"); err == nil {
			bootID = s
		}
		if tv, err := unix.SysctlTimeval("kern.boottime"); err == nil {
			bootAt = time.Unix(tv.Unix())
		}
	})
}

func hostBootID() string       { loadHost(); return bootID }
func hostPidNamespace() string { return "" }

// BootTime is when this boot began, or the zero time when unknown.
func BootTime() time.Time { loadHost(); return bootAt }

const szomb = 5 // p_stat of a zombie, from <sys/proc.h>

// Proc tells what the platform knows of pid now: no process, an exited
// one, or a live one and its start.
func Proc(pid int) (State, error) {
	if pid <= 0 {
		return State{}, nil
	}
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		switch kerr := syscall.Kill(pid, 0); kerr {
		case syscall.ESRCH:
			return State{}, nil
		case nil, syscall.EPERM:
			why := "kern.proc.pid returned no entry"
			if err != nil {
				why = "kern.proc.pid: " + err.Error()
			}
			return State{Exists: true, Unknown: why}, nil
		default:
			return State{}, fmt.Errorf("signal 0 to pid %d: %w", pid, kerr)
		}
	}
	sec, usec := int64(kp.Proc.P_starttime.Sec), int64(kp.Proc.P_starttime.Usec)
	return State{
		Exists: true,
		Exited: kp.Proc.P_stat == szomb,
		Start:  time.Unix(sec, usec*1000).Truncate(time.Millisecond),
		Ticks:  uint64(sec)*1_000_000 + uint64(usec),
	}, nil
}

// InInitialPidNamespace is true: there are no pid namespaces here.
func InInitialPidNamespace() bool { return true }

// InNamespace fails: there are no pid namespaces here.
func InNamespace(ns string, pid int) (State, bool, error) {
	return State{}, false, errors.New("pid namespaces exist on Linux only")
}
