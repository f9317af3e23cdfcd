//go:build darwin

package sandboxtest

import (
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize-go/internal/proctree"
)

// processID is the command's pid (macOS offers no start ticks here).
func processID(pid int) string { return proctree.ID(pid, 0) }

// watch waits for the command to become a zombie, without reaping it;
// its status is the one the kernel keeps for wait (p_xstat). Once it
// cannot be looked up (Stop reaped it), Stop has set the status.
func (p *Process) watch() {
	for {
		kp, err := unix.SysctlKinfoProc("kern.proc.pid", p.cmd.Process.Pid)
		if err != nil {
			p.markExited(nil)
			return
		}
		if kp.Proc.P_stat == 5 { // SZOMB
			var exitErr error
			switch ws := syscall.WaitStatus(kp.Proc.P_xstat); {
			case ws.Signaled():
				exitErr = fmt.Errorf("signal: %v", ws.Signal())
			case ws.ExitStatus() != 0:
				exitErr = fmt.Errorf("exit status %d", ws.ExitStatus())
			}
			p.markExited(exitErr)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
