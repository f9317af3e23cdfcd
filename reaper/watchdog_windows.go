//go:build windows

package reaper

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

const isWindows = true

// interpreter prefers Windows PowerShell, present on every Windows since 7,
// and falls back to PowerShell 7.
func interpreter() ([]string, error) {
	for _, name := range []string{"powershell.exe", "pwsh.exe"} {
		if p, err := exec.LookPath(name); err == nil {
			return []string{p, "-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-File"}, nil
		}
	}
	return nil, errors.New("neither powershell.exe nor pwsh.exe is on PATH")
}

// startDetached starts cmd without a console, in a process group of its
// own, and out of this process's job object when the job allows it (a CI
// runner that kills its job would otherwise kill the watchdog too).
func startDetached(cmd *exec.Cmd) error {
	flags := uint32(windows.DETACHED_PROCESS | windows.CREATE_NEW_PROCESS_GROUP)
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: flags | windows.CREATE_BREAKAWAY_FROM_JOB, HideWindow: true}
	err := cmd.Start()
	if err != nil && errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		// The job forbids breakaway: stay in it rather than not start.
		c2 := exec.Command(cmd.Path, cmd.Args[1:]...)
		c2.Stdin, c2.Stdout, c2.Stderr, c2.Env, c2.Dir = cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env, cmd.Dir
		c2.SysProcAttr = &syscall.SysProcAttr{CreationFlags: flags, HideWindow: true}
		*cmd = *c2 // a fresh, unstarted Cmd over one that never started
		return cmd.Start()
	}
	return err
}
