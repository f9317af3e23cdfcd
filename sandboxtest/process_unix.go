//go:build unix

package sandboxtest

import (
	"errors"
	"os/exec"
	"syscall"
	"time"

	"github.com/rightsize/rightsize-go/internal/proctree"
)

// processSys is nothing on Unix: the process group holds the tree.
type processSys struct{}

// checkProcAttr refuses what would take the command out of reach of its
// group: a session of its own, or a group chosen by the caller.
func checkProcAttr(cmd *exec.Cmd) error {
	if a := cmd.SysProcAttr; a != nil {
		if a.Setsid {
			return errors.New("SysProcAttr.Setsid: a command in a session of its own cannot be ended with its process group; start it without")
		}
		if a.Setpgid && a.Pgid != 0 {
			return errors.New("SysProcAttr.Pgid: the command must lead a process group of its own; leave Pgid at 0")
		}
		if a.Foreground {
			return errors.New("SysProcAttr.Foreground: a test's command cannot take the terminal")
		}
	}
	return nil
}

// setProcessGroup makes the command lead a process group of its own.
func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
}

func (p *Process) afterStart() {}

// endGroup ends the command's group, pinned by the command itself: it is
// this process's child and is not reaped before this returns.
func (p *Process) endGroup(grace time.Duration) proctree.Result {
	_ = p.sys // nothing on Unix
	return proctree.EndGroup(p.cmd.Process.Pid, p.mark, grace)
}
