package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/capbuf"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Process is a local program a test started with StartProcess: the
// command and every process it starts in turn, ended together when the
// test ends, however it ends.
type Process struct {
	o    owner
	cmd  *exec.Cmd
	s    *reaper.Session
	line string // the run's ledger line
	mark string // the command's mark (EnvMark's value)

	out *outputBuffer
	sys processSys // what the system needs to end the tree (a Job Object on Windows)

	exited   chan struct{} // closed when the command itself has exited
	told     chan struct{} // closed once the watchdog and the ledger have its id
	exitErr  error         // its exit status, set before exited closes
	exitOnce sync.Once

	stopOnce sync.Once
	stopErr  error
}

// processKind is the ledger's kind of local processes.
const processKind = names.ProcessKind

// outputLimit bounds what a Process keeps of its output.
const outputLimit = 1 << 20

// StartProcess starts cmd (not started yet) as a local sandbox of the
// test: in a process group of its own, with a mark in its environment
// that every process it starts inherits, listed in the run's ledger
// before it starts. It ends — the command and every process of its group,
// SIGTERM then SIGKILL after a grace — when the test ends (tb.Cleanup),
// when Stop is called, when cmd's context ends (exec.CommandContext), and
// when the test binary dies, however it dies: its watchdog ends them
// within about a second, and the next test process's sweep is the
// backstop. Nothing else is ever signalled: see docs/using.md, "Local
// processes", for the rules.
//
// The command is the Process's from then on: wait for it with the
// Process's Wait, never cmd.Wait, which would reap it while its group's
// number must stay pinned.
//
// Unless cmd sets them, its stdout and stderr are kept (Output; the last
// part is logged when the test ends, which go test shows for a failed test
// or with -v). StartProcess fails the test when the command cannot start.
//
//	srv := sandboxtest.StartProcess(t, exec.Command(bin, "--listen", "127.0.0.1:8081"))
//	srv.WaitForPort(t.Context(), "127.0.0.1:8081")
func StartProcess(tb testing.TB, cmd *exec.Cmd) *Process {
	tb.Helper()
	og := origin.Of(tb)
	p, err := startProcess(tbOwner{tb}, cmd, og)
	if err != nil {
		tb.Fatalf("sandboxtest: %v (%s)", err, og)
	}
	return p
}

func startProcess(o owner, cmd *exec.Cmd, og origin.Origin) (*Process, error) {
	if cmd == nil || cmd.Path == "" {
		return nil, errors.New("start process: no command")
	}
	if cmd.Process != nil {
		return nil, fmt.Errorf("start process %s: the command was started already", cmd.Path)
	}
	if err := checkProcAttr(cmd); err != nil {
		return nil, fmt.Errorf("start process %s: %w", cmd.Path, err)
	}
	s, err := processSession(o.context())
	if err != nil {
		return nil, err
	}
	p := &Process{o: o, cmd: cmd, s: s, exited: make(chan struct{}), told: make(chan struct{})}
	p.line = s.NextProcessLine(proctree.SessionID())
	p.mark = proctree.Mark(s.RunID(), p.line)
	o.addCleanup(p.cleanup)

	note, err := s.AdmitFrom(processKind, p.line, og)
	if msg := watchdogNote(s, note); msg != "" {
		o.logf("%s", msg)
	}
	if err != nil {
		return nil, fmt.Errorf("start process %s: %w", cmd.Path, err)
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append([]string(nil), env...), proctree.EnvMark+"="+p.mark)
	setProcessGroup(cmd)
	var outW *os.File // the write end of the kept output's pipe
	if cmd.Stdout == nil || cmd.Stderr == nil {
		// A pipe of its own rather than exec's copy: the copy's end is
		// known, so an exit is reported only with the output that came
		// before it.
		r, w, err := os.Pipe()
		if err != nil {
			_ = s.Forget(processKind, p.line)
			return nil, fmt.Errorf("start process %s: %w", cmd.Path, err)
		}
		p.out, outW = newOutputBuffer(outputLimit, r), w
		if cmd.Stdout == nil {
			cmd.Stdout = w
		}
		if cmd.Stderr == nil {
			cmd.Stderr = w
		}
	}
	if cmd.WaitDelay == 0 {
		// A descendant that keeps the output pipe open must not hold
		// the end of the test.
		cmd.WaitDelay = 2 * time.Second
	}
	if cmd.Cancel != nil {
		// exec.CommandContext: the context's end ends the whole tree, not
		// only the command.
		cmd.Cancel = func() error {
			go func() {
				// Not before its id is told: an id told after the
				// command's reap would pass for a pinned group.
				<-p.told
				p.Stop(context.Background())
			}()
			return nil
		}
	}
	err = cmd.Start()
	if outW != nil {
		outW.Close() // the command holds its own copy
		if err != nil {
			p.out.r.Close()
		} else {
			go p.out.copy()
		}
	}
	if err != nil {
		_ = s.Forget(processKind, p.line)
		return nil, fmt.Errorf("start process %s: %w", cmd.Path, err)
	}
	p.afterStart()
	s.Created(processKind, p.line, processID(cmd.Process.Pid))
	close(p.told)
	go p.watch()
	return p, nil
}

// markExited records the command's exit, once.
func (p *Process) markExited(err error) {
	p.exitOnce.Do(func() {
		p.exitErr = err
		close(p.exited)
	})
}

// Pid is the command's process id; its process group has the same number.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Wait waits until the command itself exits (the processes it started may
// still run: Stop ends them) or ctx ends, and returns its exit status: nil
// for exit 0, otherwise an error saying the status or the signal (an
// *exec.ExitError once Stop has collected the command; before that, the
// command is not reaped, so that its group's number stays its own).
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.exited:
		if p.out != nil {
			// What it printed before it exited is in Output on return
			// (bounded: a process it started may hold the pipe).
			p.out.settle(ctx)
		}
		return p.exitErr
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Exited reports whether the command itself has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Stop ends the command and every process of its group: SIGTERM, a grace
// of 2 s for them to go, SIGKILL. A process that left the group (setsid)
// is reported as escaped and not signalled. Stop returns an error when
// something could not be ended; calling it again returns the same.
func (p *Process) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() { p.stopErr = p.stop(ctx) })
	return p.stopErr
}

func (p *Process) stop(ctx context.Context) error {
	grace := stopGrace(defaultStopGrace, p.o.deadline())
	if d, ok := ctx.Deadline(); ok {
		grace = min(grace, time.Until(d))
	}
	ended := p.endGroup(grace)
	// The watchdog takes a command it was told as unreaped by its owner:
	// it forgets it before the reap.
	p.s.Untell(processKind, p.line)
	// Reaped only now: until the group was ended, the command's zombie
	// kept its number from passing to another process.
	p.markExited(p.cmd.Wait())
	if p.out != nil {
		p.out.close(ctx)
	}
	var errs []error
	for _, e := range ended.Escaped {
		warnf("sandboxtest: process %d (%s), started by %s, escaped: it %s; it was not signalled and may still run", e.PID, e.Command, p.cmd.Path, e.Why)
	}
	for _, l := range ended.Left {
		errs = append(errs, fmt.Errorf("process %d (%s): %s", l.PID, l.Command, l.Why))
	}
	if ended.Unproven != nil {
		errs = append(errs, ended.Unproven)
	}
	if len(errs) == 0 && len(ended.Escaped) == 0 {
		if err := p.s.Forget(processKind, p.line); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sandboxtest: stop process %s: %w (its line stays in the ledger for the next sweep)", p.cmd.Path, err)
	}
	return nil
}

func (p *Process) cleanup() {
	if p.cmd.Process == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		p.o.errorf("%v", err)
	}
	if p.out != nil {
		if out := p.out.tail(8 << 10); out != "" {
			p.o.logf("sandboxtest: process %s (pid %d) output:\n%s", p.cmd.Path, p.Pid(), out)
		}
	}
}

// Output is what the command and its processes wrote on the stdout and
// stderr StartProcess kept (the first MiB), "" when cmd set both.
func (p *Process) Output() string {
	if p.out == nil {
		return ""
	}
	return p.out.String()
}

// WaitForLog waits until the output holds s, the command exits, or ctx
// ends.
func (p *Process) WaitForLog(ctx context.Context, s string) error {
	if p.out == nil {
		return errors.New("sandboxtest: WaitForLog: the command's output is not kept (cmd.Stdout and cmd.Stderr were set)")
	}
	for {
		// The channel first: a write between the check and the wait
		// must wake this loop.
		changed := p.out.changed()
		if strings.Contains(p.out.String(), s) {
			return nil
		}
		select {
		case <-p.exited:
			p.out.settle(ctx)
			if strings.Contains(p.out.String(), s) {
				return nil
			}
			return fmt.Errorf("sandboxtest: %s exited (%v) before printing %q", p.cmd.Path, p.exitErr, s)
		case <-ctx.Done():
			return fmt.Errorf("sandboxtest: waiting for %q from %s: %w", s, p.cmd.Path, context.Cause(ctx))
		case <-changed:
		}
	}
}

// WaitForPort waits until addr ("127.0.0.1:8081") accepts a TCP
// connection, the command exits, or ctx ends.
func (p *Process) WaitForPort(ctx context.Context, addr string) error {
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("sandboxtest: %s exited (%v) before %s accepted a connection", p.cmd.Path, p.exitErr, addr)
		case <-ctx.Done():
			return fmt.Errorf("sandboxtest: waiting for %s (%s): %w", addr, p.cmd.Path, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// outputBuffer keeps the first bytes written (capbuf.Head: past its
// limit, String says how many were dropped), and tells waiters of each
// write.
type outputBuffer struct {
	mu     sync.Mutex
	head   *capbuf.Head
	notify chan struct{}

	r       *os.File      // the read end of the command's output pipe
	drained chan struct{} // closed when copy has read all of it
}

func newOutputBuffer(limit int, r *os.File) *outputBuffer {
	return &outputBuffer{head: capbuf.New(limit), r: r, drained: make(chan struct{})}
}

// copy reads the pipe until every process holding its write end has
// closed it (or settle gave up and closed the read end).
func (b *outputBuffer) copy() {
	defer close(b.drained)
	defer b.r.Close()
	_, _ = io.Copy(b, b.r)
}

// outputDrain bounds how long an exited command's output is waited for:
// a process it started may hold the pipe open for ever.
const outputDrain = 2 * time.Second

// settle waits until the pipe is drained, outputDrain has passed or ctx
// ends. It reports whether the pipe was drained.
func (b *outputBuffer) settle(ctx context.Context) bool {
	t := time.NewTimer(outputDrain)
	defer t.Stop()
	select {
	case <-b.drained:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// close ends copy once the command's tree is ended: what is still
// unread after settle is dropped.
func (b *outputBuffer) close(ctx context.Context) {
	if !b.settle(ctx) {
		go b.r.Close() // never blocks the caller, wherever Close would
	}
}

func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.head.Write(p)
	if b.notify != nil {
		close(b.notify)
		b.notify = nil
	}
	return len(p), nil
}

func (b *outputBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.head.String()
}

// tail is the last n bytes kept.
func (b *outputBuffer) tail(n int) string {
	s := b.String()
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// changed returns a channel closed at the next write.
func (b *outputBuffer) changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.notify == nil {
		b.notify = make(chan struct{})
	}
	return b.notify
}

// StartProcess starts cmd for the whole package, as StartProcess does for
// a test: it ends when Main ends (or the binary dies).
func (s *Suite) StartProcess(cmd *exec.Cmd) *Process {
	og := s.origin()
	p, err := startProcess(s, cmd, og)
	if err != nil {
		s.fatalf("sandboxtest: %v (%s)", err, og)
	}
	return p
}
