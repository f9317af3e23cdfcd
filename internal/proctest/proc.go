package proctest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// prefix starts every report line; other lines are kept as they are.
const prefix = "rz:"

// Spec says how to start a Proc. Only Argv is required.
type Spec struct {
	// Name is for messages ("owner", "helper sweeper"); the program's base
	// name when empty.
	Name string
	// Argv is the program and its arguments; TestArgv gives those that
	// re-execute this test binary.
	Argv []string
	// Env is the whole environment; nil is this process's. Environ builds
	// one.
	Env []string
	// Dir is the working folder; "" is this process's.
	Dir string
	// Setpgid puts the process in a process group of its own (pgid = pid),
	// so that a signal to the group does not reach the test; EnsureDead
	// then kills the whole group. Unix only.
	Setpgid bool
	// Setsid is Setpgid in a session of its own, without the controlling
	// terminal of the test (so /dev/tty cannot be opened). Unix only.
	Setsid bool
}

// Proc is a started process, what it said and how it ended. Its stdin is
// a pipe (Send, CloseStdin), closed when it is killed or the test process
// dies. A Proc is safe for use by many goroutines.
type Proc struct {
	Cmd *exec.Cmd
	// Name is for messages.
	Name string

	setpgid bool
	in      io.WriteCloser

	mu      sync.Mutex
	vals    map[string]string
	keys    []string // in the order first said
	lines   []string // stdout lines that are not reports
	stderr  strings.Builder
	change  chan struct{} // closed and replaced at each line, end-of-file and exit
	outDone bool          // stdout reached end-of-file
	errDone bool          // stderr reached end-of-file
	exited  bool
	err     error // from Wait, once exited
	killed  time.Time
}

// Start starts the process described by s and reads its output.
func Start(s Spec) (*Proc, error) {
	if len(s.Argv) == 0 {
		return nil, errors.New("proctest: Spec.Argv is empty")
	}
	name := s.Name
	if name == "" {
		name = filepath.Base(s.Argv[0])
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Env, cmd.Dir = s.Env, s.Dir
	if s.Setpgid || s.Setsid {
		if err := setpgid(cmd, s.Setsid); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
	}
	p := &Proc{Cmd: cmd, Name: name, setpgid: s.Setpgid || s.Setsid, vals: map[string]string{}, change: make(chan struct{})}
	var err error
	if p.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	// Only the process (and what inherits its output) holds the write ends
	// now: end-of-file comes when they have all closed them.
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go p.readStdout(outR)
	go p.readStderr(errR)
	go p.wait()
	return p, nil
}

func (p *Proc) readStdout(r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		p.mu.Lock()
		if kv, ok := strings.CutPrefix(l, prefix); ok {
			k, v, _ := strings.Cut(kv, "=")
			if _, seen := p.vals[k]; !seen {
				p.keys = append(p.keys, k)
			}
			p.vals[k] = v
		} else {
			p.lines = append(p.lines, l)
		}
		p.notify()
		p.mu.Unlock()
	}
	// Whatever stopped the scanner (a line over 16 MiB), drain, so that
	// the process never blocks on a full pipe.
	_, _ = io.Copy(io.Discard, r)
	p.mu.Lock()
	p.outDone = true
	p.notify()
	p.mu.Unlock()
}

func (p *Proc) readStderr(r *os.File) {
	defer r.Close()
	var buf [32 << 10]byte
	for {
		n, err := r.Read(buf[:])
		p.mu.Lock()
		p.stderr.Write(buf[:n])
		if err != nil {
			p.errDone = true
		}
		p.notify()
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (p *Proc) wait() {
	err := p.Cmd.Wait()
	p.mu.Lock()
	p.exited, p.err = true, err
	p.notify()
	p.mu.Unlock()
}

// notify wakes the waiters; p.mu is held.
func (p *Proc) notify() {
	close(p.change)
	p.change = make(chan struct{})
}

// ended: the process exited and nothing more can be read from it. p.mu is
// held.
func (p *Proc) ended() bool { return p.exited && p.outDone && p.errDone }

// await waits up to timeout for cond, evaluated with p.mu held at each
// change; false when the time ran out.
func (p *Proc) await(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		ok, ch := cond(), p.change
		p.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// Get waits up to timeout for the process to say key and returns the
// value; the error says why not (it ended first, or the time ran out),
// with its output.
func (p *Proc) Get(key string, timeout time.Duration) (string, error) {
	var v string
	var said, ended bool
	p.await(timeout, func() bool {
		v, said = p.vals[key]
		ended = p.ended()
		return said || ended
	})
	switch {
	case said:
		return v, nil
	case ended:
		return "", fmt.Errorf("%s ended (%s) without saying %s:\n%s", p.Name, p.Status(), key, p.Output())
	default:
		return "", fmt.Errorf("%s did not say %s within %s:\n%s", p.Name, key, timeout, p.Output())
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

// Lines returns the lines the process printed on stdout that are not
// reports, in order.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// Stderr is what the process wrote on stderr so far.
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Output is what the process printed besides its reports: stdout, then
// stderr.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, l := range p.lines {
		b.WriteString(l + "\n")
	}
	return b.String() + p.stderr.String()
}

// Send writes a line to the process's stdin.
func (p *Proc) Send(line string) error {
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		return fmt.Errorf("%s: write stdin: %w", p.Name, err)
	}
	return nil
}

// CloseStdin closes the process's stdin: a helper that blocks (Block) ends
// normally.
func (p *Proc) CloseStdin() error { return p.in.Close() }

// Pid is the process's id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Kill kills the process (SIGKILL), noting the instant just before.
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

// Wait waits up to timeout for the process to end: to exit, and its stdout
// and stderr to reach end-of-file (a process it started may hold them
// longer). False if that did not happen in time.
func (p *Proc) Wait(timeout time.Duration) bool {
	return p.await(timeout, p.ended)
}

// Exited reports whether the process has exited, and how (nil: exit 0).
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

// EnsureDead closes the process's stdin, kills it if it has not ended
// (with Setpgid, its whole process group) and waits for it to end.
func (p *Proc) EnsureDead() error {
	_ = p.CloseStdin()
	p.mu.Lock()
	ended, exited := p.ended(), p.exited
	p.mu.Unlock()
	if ended {
		return nil
	}
	if !exited {
		kill := p.Cmd.Process.Kill
		if p.setpgid {
			kill = func() error { return killGroup(p.Pid()) }
		}
		if err := kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("kill %s: %w", p.Name, err)
		}
	}
	if !p.Wait(time.Minute) {
		if exited, _ := p.Exited(); exited {
			return fmt.Errorf("%s exited, but a minute later its stdout or stderr is still open (held by a process it started)", p.Name)
		}
		return fmt.Errorf("%s did not die of SIGKILL within a minute", p.Name)
	}
	return nil
}
