//go:build windows

package reaper

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/windows"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// watchdogPs1 is the Windows PowerShell watchdog.
var watchdogPs1 = script("watchdog.ps1")

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

// scriptable reports whether a PowerShell is there to run the script.
func scriptable() bool {
	_, err := interpreter()
	return err == nil
}

// scriptCommand runs a copy of the script made for this spawn alone, with
// a name no other spawn uses, created exclusively in the private reaper
// folder. PowerShell parses a whole script file before it runs any of it,
// so a change to the file after the spawn runs nothing; the text is not
// handed over on the command line as on Unix because, encoded for
// -EncodedCommand, it is longer than a Windows command line may be.
func scriptCommand(dir, runID, exe string) (*exec.Cmd, string, []*os.File, error) {
	interp, err := interpreter()
	if err != nil {
		return nil, "", nil, err
	}
	name := strings.TrimSuffix(scriptName(watchdogPs1, ".ps1"), ".ps1") + "-" + strconv.Itoa(os.Getpid()) + "-" + runID + ".ps1"
	p := filepath.Join(dir, name)
	f, err := ledger.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", nil, err
	}
	_, werr := f.Write(watchdogPs1)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(p)
		return nil, "", nil, err
	}
	argv := append(interp[1:], p, exe)
	return exec.Command(interp[0], argv...), p, nil, nil
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
