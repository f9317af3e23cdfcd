package backend

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/proctest"
)

// The lease wrapper, run with this host's /bin/sh: no engine needed.

func TestPgidWriter(t *testing.T) {
	cases := []struct {
		name   string
		writes []string
		pgid   int64
		rest   string
		reason string
	}{
		{"whole", []string{"rz-exec pgid 42\nhello\n"}, 42, "hello\n", "the marker line is taken out, the rest kept"},
		{"split", []string{"rz-ex", "ec pg", "id 7", "\nerr"}, 7, "err", "frames may cut the marker anywhere"},
		{"only", []string{"rz-exec pgid 9\n"}, 9, "", "a command that writes nothing to stderr"},
		{"other", []string{"rz-exec: setsid: not found\n"}, 0, "rz-exec: setsid: not found\n", "the wrapper's own message diverges after 'rz-exec' and must pass"},
		{"garbage", []string{"rz-exec pgid x\n"}, 0, "rz-exec pgid x\n", "not a number: not a marker"},
		{"unterminated", []string{"rz-exec pg"}, 0, "rz-exec pg", "held back, then flushed at the end of the stream"},
		{"late", []string{"a\n", "rz-exec pgid 5\n"}, 0, "a\nrz-exec pgid 5\n", "only the first line can be the marker"},
	}
	for _, c := range cases {
		var out bytes.Buffer
		w := &PGIDWriter{Next: &out}
		for _, s := range c.writes {
			if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
				t.Errorf("%s: Write(%q) = %d, %v", c.name, s, n, err)
			}
		}
		w.Flush()
		if got := int64(w.PGID()); got != c.pgid || out.String() != c.rest {
			t.Errorf("%s: pgid %d, passed %q; want %d, %q: %s", c.name, got, out.String(), c.pgid, c.rest, c.reason)
		}
	}
}

func TestWaitPGID(t *testing.T) {
	// A marker written while Exec waits is what it returns.
	w := &PGIDWriter{Next: io.Discard}
	go func() { _, _ = w.Write([]byte("rz-exec pgid 42\n")) }()
	if got := w.WaitPGID(make(chan error, 1)); got != 42 {
		t.Errorf("WaitPGID with the marker written = %d, want 42", got)
	}
	// An exec that ended without one reports none.
	done := make(chan error, 1)
	done <- nil
	if got := (&PGIDWriter{Next: io.Discard}).WaitPGID(done); got != 0 {
		t.Errorf("WaitPGID after the exec ended = %d, want 0", got)
	}
}

func TestWrapperShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck is not installed")
	}
	for name, script := range map[string]string{"wrapper": wrapperScript, "end": endScript} {
		cmd := exec.Command(sc, "--shell=sh", "--severity=warning", "-")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("shellcheck of the %s script: %v\n%s", name, err, out)
		}
	}
}

// localWrapper runs the wrapper with the host's /bin/sh, which is dash on
// Debian: a second POSIX shell besides the containers' busybox.
type localWrapper struct {
	cmd    *exec.Cmd
	lease  io.WriteCloser
	stderr *proctest.Buffer
	done   chan struct{} // closed once the wrapper is reaped
}

func startLocal(t *testing.T, env []string, args ...string) *localWrapper {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the wrapper runs in Linux containers; this host is " + runtime.GOOS)
	}
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid on this host")
	}
	lw := &localWrapper{stderr: &proctest.Buffer{}, done: make(chan struct{})}
	argv := ExecArgv(true, args)
	lw.cmd = exec.Command(argv[0], argv[1:]...)
	lw.cmd.Env = append(os.Environ(), env...)
	lw.cmd.Stderr = lw.stderr
	var err error
	if lw.lease, err = lw.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := lw.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = lw.cmd.Wait()
		close(lw.done)
	}()
	t.Cleanup(func() {
		lw.lease.Close()
		select {
		case <-lw.done:
		case <-time.After(10 * time.Second):
			lw.cmd.Process.Kill()
			t.Errorf("the wrapper did not end within 10 s of its lease")
		}
	})
	return lw
}

func (lw *localWrapper) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-lw.done:
		return lw.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("the wrapper did not exit within %v", within)
		return -1
	}
}

// groupMembers lists the live (not zombie) processes of process group pg
// on this host.
func groupMembers(pg int) []string {
	var live []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
		if len(fields) > 2 && fields[2] == strconv.Itoa(pg) && fields[0] != "Z" {
			live = append(live, f+": "+s)
		}
	}
	return live
}

func localPGID(t *testing.T, lw *localWrapper) int {
	t.Helper()
	var pg int
	if !proctest.Poll(5*time.Second, func() bool {
		line, _, _ := strings.Cut(lw.stderr.String(), "\n")
		pg, _ = parseMarker([]byte(line))
		return pg > 0
	}) {
		t.Fatalf("the wrapper reported no pgid; stderr %q", lw.stderr.String())
	}
	return pg
}

func TestWrapperLocalLeaseEndsGroup(t *testing.T) {
	lw := startLocal(t, nil, "sh", "-c", "sleep 300 & sleep 300")
	pg := localPGID(t, lw)
	if !proctest.Poll(5*time.Second, func() bool { return len(groupMembers(pg)) == 3 }) {
		t.Fatalf("group %d: %q; want the shell and its two sleeps", pg, groupMembers(pg))
	}
	start := time.Now()
	lw.lease.Close()
	code := lw.wait(t, ExecGrace+3*time.Second)
	if left := groupMembers(pg); len(left) > 0 {
		t.Errorf("after the lease ended, group %d still has %q", pg, left)
	}
	t.Logf("lease closed → wrapper gone in %v, exit %d", time.Since(start), code)
}

func TestWrapperLocalExitEndsLeftovers(t *testing.T) {
	lw := startLocal(t, nil, "sh", "-c", "sleep 300 & echo started; exit 4")
	pg := localPGID(t, lw)
	if code := lw.wait(t, 5*time.Second); code != 4 {
		t.Errorf("exit code %d, want the command's 4", code)
	}
	if left := groupMembers(pg); len(left) > 0 {
		t.Errorf("the command exited, but its group %d still has %q", pg, left)
	}
}

func TestWrapperLocalNoSetsid(t *testing.T) {
	// A PATH with no setsid on it; sleep and kill are not needed to fail.
	lw := startLocal(t, []string{"PATH=" + t.TempDir()}, "true")
	if code := lw.wait(t, 5*time.Second); code != setsidMissingCode {
		t.Errorf("exit code %d, want %d", code, setsidMissingCode)
	}
	if !SetsidMissing(setsidMissingCode, []byte(lw.stderr.String())) {
		t.Errorf("stderr %q is not read as a missing setsid", lw.stderr.String())
	}
}
