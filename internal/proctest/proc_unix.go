//go:build unix

package proctest

import (
	"os/exec"
	"syscall"
)

func setpgid(cmd *exec.Cmd, setsid bool) error {
	if setsid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		return nil
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return nil
}

// killGroup SIGKILLs process group pgid: a helper started with Setpgid and
// whatever it started in its group.
func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil // the group is gone already
	}
	return err
}
