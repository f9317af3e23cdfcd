package ledger

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
func bootTime() time.Time      { loadHost(); return bootAt }

const szomb = 5 // p_stat of a zombie, from <sys/proc.h>

func lookupProc(pid int) (procState, error) {
	if pid <= 0 {
		return procState{}, nil
	}
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		switch kerr := syscall.Kill(pid, 0); kerr {
		case syscall.ESRCH:
			return procState{}, nil
		case nil, syscall.EPERM:
			why := "kern.proc.pid returned no entry"
			if err != nil {
				why = "kern.proc.pid: " + err.Error()
			}
			return procState{exists: true, unknown: why}, nil
		default:
			return procState{}, fmt.Errorf("signal 0 to pid %d: %w", pid, kerr)
		}
	}
	sec, usec := int64(kp.Proc.P_starttime.Sec), int64(kp.Proc.P_starttime.Usec)
	return procState{
		exists: true,
		exited: kp.Proc.P_stat == szomb,
		start:  time.Unix(sec, usec*1000).Truncate(time.Millisecond),
		ticks:  uint64(sec)*1_000_000 + uint64(usec),
	}, nil
}

// There are no pid namespaces here.
func inInitialPidNamespace() bool { return true }

func lookupInNamespace(ns string, pid int) (procState, bool, error) {
	return procState{}, false, errors.New("pid namespaces exist on Linux only")
}
