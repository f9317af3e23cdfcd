package reaper_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/ledger"
)

// The tests that need a process to die, or two processes to race, run this
// test binary again as a helper: `-test.run=^TestXHelper$` with envRole
// set. A helper says what the test needs to know on its stdout, one
// "key=value" line each.

const envRole = "RZ_REAPER_TEST_ROLE"

// helper is a re-executed test binary.
type helper struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr string // file path

	mu      sync.Mutex
	vals    map[string]string
	changed chan struct{} // closed and replaced at each line, EOF and exit
	eof     bool          // stdout reached end-of-file
	eofAt   time.Time
	exited  bool
	err     error // from Wait, once exited
}

type helperOpts struct {
	env     []string
	setpgid bool // a process group of its own, so the test can signal it whole
	stdin   bool // a pipe the test writes to
}

// startHelper runs the test named test (a TestXHelper) as a helper, in
// cache, with role set.
func startHelper(t *testing.T, test, role, cache string, o helperOpts) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "RIGHTSIZE_") || strings.HasPrefix(kv, "RZ_")
	})
	cmd.Env = append(cmd.Env, envRole+"="+role, ledger.EnvCacheDir+"="+cache)
	cmd.Env = append(cmd.Env, o.env...)
	cmd.Dir = t.TempDir()
	if o.setpgid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	h := &helper{t: t, name: role, cmd: cmd, vals: map[string]string{}, changed: make(chan struct{})}
	h.stderr = filepath.Join(t.TempDir(), "stderr")
	ef, err := os.Create(h.stderr)
	must(t, err)
	defer ef.Close()
	cmd.Stderr = ef
	r, w, err := os.Pipe()
	must(t, err)
	cmd.Stdout = w
	if o.stdin {
		h.stdin, err = cmd.StdinPipe()
		must(t, err)
	}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		t.Fatalf("helper %s: %v", role, err)
	}
	w.Close() // only the helper (and whatever inherits its stdout) holds it now
	go h.read(r)
	go func() {
		err := cmd.Wait()
		h.mu.Lock()
		h.exited, h.err = true, err
		h.signal()
		h.mu.Unlock()
	}()
	t.Cleanup(func() {
		if h.stdin != nil {
			h.stdin.Close()
		}
		if o.setpgid {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the helper and its children
		} else {
			cmd.Process.Kill()
		}
		h.until(time.Minute, "to exit", func() bool { return h.exited })
	})
	return h
}

func (h *helper) signal() {
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *helper) read(r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		h.mu.Lock()
		h.vals[k] = v
		h.signal()
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.eof, h.eofAt = true, time.Now()
	h.signal()
	h.mu.Unlock()
}

// until waits for cond (evaluated under the lock) at each change, for at
// most d; it fails the test with the helper's stderr otherwise.
func (h *helper) until(d time.Duration, what string, cond func() bool) {
	h.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		h.mu.Lock()
		ok, ch := cond(), h.changed
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			h.t.Fatalf("helper %s: waited %s for it %s\nstderr:\n%s", h.name, d, what, h.stderrText())
		}
	}
}

// get waits for the helper to print key, and returns its value; the helper
// exiting first fails the test.
func (h *helper) get(key string) string {
	h.t.Helper()
	var v string
	var exited bool
	h.until(time.Minute, "to print "+key, func() bool {
		v2, ok := h.vals[key]
		v, exited = v2, h.exited && !ok
		return ok || exited
	})
	if exited {
		h.t.Fatalf("helper %s exited (%v) without printing %s\nstderr:\n%s", h.name, h.err, key, h.stderrText())
	}
	return v
}

func (h *helper) stderrText() string {
	b, _ := os.ReadFile(h.stderr)
	return string(b)
}

func (h *helper) pid() int { return h.cmd.Process.Pid }

// send writes a line to the helper's stdin.
func (h *helper) send(line string) {
	h.t.Helper()
	if _, err := fmt.Fprintln(h.stdin, line); err != nil {
		h.t.Fatalf("helper %s: write stdin: %v", h.name, err)
	}
}

// role is this process's role when it runs as a helper: "" otherwise.
func role() string { return os.Getenv(envRole) }

// say prints key=value for the test that started this helper.
func say(key string, value any) { fmt.Printf("%s=%v\n", key, value) }

// helperFail ends a helper that cannot go on; the test sees its stderr.
func helperFail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(3)
}

// alive reports whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(syscall.Kill(pid, 0), syscall.EPERM)
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}
