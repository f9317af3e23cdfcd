//go:build !windows

package reaper

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// watchdogSh is the POSIX sh watchdog.
var watchdogSh = script("watchdog.sh")

// scriptCommand runs the script's text itself, `sh -c TEXT
// rightsize-watchdog RUN`: the shell never reads it from a file, so nobody
// who can write a file after the spawn can change what runs (dash reads a
// script file lazily, the rest of it after the owner dies). PROGRAM, this
// program's path, goes in the environment (envScriptProgram): a command
// line that ended with a test binary's path would be ended with the
// leftover test binaries a harness kills by it (pkill -f). A copy is
// written under reaper/ for people to read. The script is handed, as
// descriptors 3 to 5, this
// program (so that a binary `go test` deletes at the owner's death still
// runs) and an unlinked file, for writing and for reading, where it keeps
// the lines it is told (no file of it is left, whatever ends it). The
// caller closes the handed files once the script started.
func scriptCommand(dir, runID, exe string) (*exec.Cmd, string, []*os.File, error) {
	copyPath, err := writeCopy(dir, scriptName(watchdogSh, ".sh"), watchdogSh)
	if err != nil {
		return nil, "", nil, err
	}
	prog, err := os.Open(exe)
	if err != nil {
		return nil, "", nil, err
	}
	handed := []*os.File{prog}
	fail := func(err error) (*exec.Cmd, string, []*os.File, error) {
		for _, f := range handed {
			f.Close()
		}
		return nil, "", nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	told := filepath.Join(dir, ".told-"+runID+"-"+hex.EncodeToString(b[:]))
	w, err := ledger.OpenFile(told, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fail(err)
	}
	handed = append(handed, w)
	r, err := ledger.OpenFile(told, os.O_RDONLY, 0)
	os.Remove(told)
	if err != nil {
		return fail(err)
	}
	handed = append(handed, r)
	cmd := exec.Command("/bin/sh", "-c", string(watchdogSh), "rightsize-watchdog", runID)
	cmd.ExtraFiles = handed
	return cmd, copyPath, handed, nil
}

// scriptable reports whether the script watchdog's shell is there.
func scriptable() bool {
	fi, err := os.Stat("/bin/sh")
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
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
