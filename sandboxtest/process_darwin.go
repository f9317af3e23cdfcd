//go:build darwin

package sandboxtest

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize-go/internal/proctree"
)

// processID is the command's pid (macOS offers no start ticks here).
func processID(pid int) string { return proctree.ID(pid, 0) }

// watch waits for the command to become a zombie, without reaping it; its
// status is known once Stop reaps it.
func (p *Process) watch() {
	for {
		kp, err := unix.SysctlKinfoProc("kern.proc.pid", p.cmd.Process.Pid)
		if err != nil || kp.Proc.P_stat == 5 { // SZOMB
			p.markExited(nil)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
