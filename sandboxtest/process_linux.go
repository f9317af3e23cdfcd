//go:build linux

package sandboxtest

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize-go/internal/proctree"
)

// processID is the command's name for the watchdog: its pid and start
// ticks.
func processID(pid int) string {
	st, err := proctree.ReadStat(pid)
	if err != nil {
		return proctree.ID(pid, 0)
	}
	return proctree.ID(pid, st.StartTicks)
}

// watch waits for the command to exit without reaping it (WNOWAIT): its
// zombie keeps the group's number this process's until Stop has ended the
// group.
func (p *Process) watch() {
	var info unix.Siginfo
	var err error
	for {
		err = unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		// Reaped by Stop already (ECHILD): Stop set the status.
		return
	}
	// siginfo_t for SIGCHLD: si_signo, si_errno, si_code (at 8), then the
	// union, pointer-aligned (at 16 on 64-bit, 12 on 32-bit): si_pid,
	// si_uid, si_status.
	raw := (*[unsafe.Sizeof(info)]byte)(unsafe.Pointer(&info))
	union := 12
	if unsafe.Sizeof(uintptr(0)) == 8 {
		union = 16
	}
	code := int32(binary.NativeEndian.Uint32(raw[8:]))
	status := int32(binary.NativeEndian.Uint32(raw[union+8:]))
	var exitErr error
	switch code {
	case 1: // CLD_EXITED
		if status != 0 {
			exitErr = fmt.Errorf("exit status %d", status)
		}
	default: // killed, dumped
		exitErr = fmt.Errorf("signal: %v", syscall.Signal(status))
	}
	p.markExited(exitErr)
}
