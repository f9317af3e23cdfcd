//go:build !windows

package reaper

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/rightsize/rightsize-go/internal/ledger"

	"github.com/rightsize/rightsize-go/internal/reaper/scripts"
)

// scriptCommand runs the script's text itself, `sh -c TEXT NAME ARGS...`:
// the shell never reads it from a file, so nobody who can write a file
// after the spawn can change what runs (dash reads a script file lazily,
// the rest of it after the owner dies). A copy is written under reaper/
// for people to read.
func scriptCommand(dir, runsDir, runID string, args []string) (*exec.Cmd, string, error) {
	copyPath, err := writeCopy(dir, scriptName(scripts.WatchdogSh, ".sh"), scripts.WatchdogSh)
	if err != nil {
		return nil, "", err
	}
	argv := append([]string{"-c", string(scripts.WatchdogSh), "rightsize-watchdog", runsDir, runID}, args...)
	return exec.Command("/bin/sh", argv...), copyPath, nil
}

// startDetached starts cmd in a session of its own: a Ctrl-C sent to the
// test's process group, or the group's death, does not reach it. (Setsid
// alone: adding Setpgid makes setsid fail with EPERM.)
func startDetached(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd.Start()
}

// writeCopy writes content to dir/name for people to read, unless a file
// with that name is there already (its content is never read back, and
// never run).
func writeCopy(dir, name string, content []byte) (string, error) {
	p := filepath.Join(dir, name)
	if _, err := os.Lstat(p); err == nil {
		return p, nil
	}
	return p, ledger.WriteFileAtomic(p, content)
}
