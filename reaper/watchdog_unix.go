//go:build !windows

package reaper

import (
	"os/exec"
	"syscall"
)

const isWindows = false

func interpreter() ([]string, error) { return []string{"/bin/sh"}, nil }

// startDetached starts cmd in a session of its own: a Ctrl-C sent to the
// test's process group, or the group's death, does not reach it. (Setsid
// alone: adding Setpgid makes setsid fail with EPERM.)
func startDetached(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd.Start()
}
