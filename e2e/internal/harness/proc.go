//go:build linux

package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a started owner (or any process that speaks "rz:key=value" on
// stdout).
type Proc struct {
	Cmd *exec.Cmd
	// Name is for messages.
	Name string

	in io.WriteCloser

	mu     sync.Mutex
	vals   map[string]string
	keys   []string // in the order first said
	other  bytes.Buffer
	stderr bytes.Buffer
	change chan struct{}
	exited bool
	err    error
	killed time.Time
}

// ProcSpec says how to start a Proc.
type ProcSpec struct {
	Name string
	// Argv is the program and its arguments.
	Argv []string
	Env  []string
	Dir  string
	// Setpgid puts the process in a process group of its own (pgid = pid),
	// so that a signal to the group does not reach the caller.
	Setpgid bool
}

// Start starts the process with a pipe on stdin (closed by CloseStdin or
// when the caller dies) and reads its output.
func Start(s ProcSpec) (*Proc, error) {
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Env, cmd.Dir = s.Env, s.Dir
	if s.Setpgid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	p := &Proc{Cmd: cmd, Name: s.Name, vals: map[string]string{}, change: make(chan struct{})}
	cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	go p.read(out)
	return p, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(b)
}

func (p *Proc) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		p.mu.Lock()
		if kv, ok := strings.CutPrefix(l, "rz:"); ok {
			k, v, _ := strings.Cut(kv, "=")
			if _, seen := p.vals[k]; !seen {
				p.keys = append(p.keys, k)
			}
			p.vals[k] = v
		} else {
			p.other.WriteString(l)
			p.other.WriteByte('\n')
		}
		p.notify()
		p.mu.Unlock()
	}
	// Whatever stopped the scanner, drain so the process never blocks.
	_, _ = io.Copy(io.Discard, out)
	err := p.Cmd.Wait()
	p.mu.Lock()
	p.exited, p.err = true, err
	p.notify()
	p.mu.Unlock()
}

func (p *Proc) notify() {
	close(p.change)
	p.change = make(chan struct{})
}

// Get waits up to timeout for the process to say key and returns the
// value; the error says why not (it ended first, or the time ran out),
// with its output.
func (p *Proc) Get(key string, timeout time.Duration) (string, error) {
	deadline := time.After(timeout)
	for {
		p.mu.Lock()
		v, ok := p.vals[key]
		exited, ch, err := p.exited, p.change, p.err
		p.mu.Unlock()
		if ok {
			return v, nil
		}
		if exited {
			return "", fmt.Errorf("%s ended (%v) without saying %s:\n%s", p.Name, err, key, p.Output())
		}
		select {
		case <-ch:
		case <-deadline:
			return "", fmt.Errorf("%s did not say %s within %s:\n%s", p.Name, key, timeout, p.Output())
		}
	}
}

// Value returns what the process said for key so far.
func (p *Proc) Value(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.vals[key]
	return v, ok
}

// Keys returns every key said so far whose name starts with prefix, in the
// order they were first said.
func (p *Proc) Keys(prefix string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, k := range p.keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// Output is what the process printed besides its rz: lines, stdout then
// stderr.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.other.String() + p.stderr.String()
}

// Send writes a line to the process's stdin.
func (p *Proc) Send(line string) error {
	_, err := io.WriteString(p.in, line+"\n")
	return err
}

// CloseStdin closes the process's stdin: an owner that blocks ends
// normally.
func (p *Proc) CloseStdin() { p.in.Close() }

// Kill sends SIGKILL, noting the instant just before.
func (p *Proc) Kill() error {
	p.mu.Lock()
	p.killed = time.Now()
	p.mu.Unlock()
	return p.Cmd.Process.Kill()
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// KilledAt is when Kill was called (zero if never).
func (p *Proc) KilledAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

// Wait waits up to timeout for the process to end; false if it still runs.
func (p *Proc) Wait(timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		p.mu.Lock()
		exited, ch := p.exited, p.change
		p.mu.Unlock()
		if exited {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// Exited reports whether the process has ended, and how (nil: exit 0).
func (p *Proc) Exited() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited, p.err
}

// Status describes how the process ended: "exit 0", "exit 2", "signal:
// killed", or "running".
func (p *Proc) Status() string {
	exited, err := p.Exited()
	if !exited {
		return "running"
	}
	ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return "signal: " + ws.Signal().String()
	case ok:
		return fmt.Sprintf("exit %d", ws.ExitStatus())
	case err == nil:
		return "exit 0"
	default:
		return err.Error()
	}
}

// Signaled returns the signal that ended the process, if one did.
func (p *Proc) Signaled() (syscall.Signal, bool) {
	if exited, _ := p.Exited(); !exited {
		return 0, false
	}
	ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}

// EnsureDead kills the process if it still runs and waits for it.
func (p *Proc) EnsureDead() error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := p.Cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	if !p.Wait(time.Minute) {
		return fmt.Errorf("%s did not die of SIGKILL within a minute", p.Name)
	}
	return nil
}
