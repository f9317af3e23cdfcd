package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// Ending is how a [Guard.Exec] ended. A command that ran past its welcome
// is an answer, not an error: [ExecResult].Cause says who ended it.
type Ending int

const (
	// Unconfirmed: the command could not run, or its end could not be
	// confirmed; Exec returned an error saying which. Cause is set when it
	// was being ended.
	Unconfirmed Ending = iota
	// Exited: the command ended by itself; ExitCode is its code.
	Exited
	// Killed: the command was ended before it exited, its process group
	// sent SIGTERM, a grace of 2 s, then SIGKILL. Cause says why: Exec's
	// context ended (context.Cause of it: a timeout, a cancel), or the
	// guard stopped while it ran ([ErrGuardStopped]: Stop, or the end of
	// the test). An exec under t.Context() that still runs when its test
	// ends has that context's cause: the testing package ends it before
	// the cleanups.
	Killed
)

// String names the ending, for messages.
func (e Ending) String() string {
	switch e {
	case Exited:
		return "exited"
	case Killed:
		return "killed"
	case Unconfirmed:
		return "unconfirmed"
	}
	return fmt.Sprintf("Ending(%d)", int(e))
}

// Errors an Exec wraps, so a caller can tell a wrong image from a failed
// command with errors.Is.
var (
	// ErrNoShell: the sandbox's image has no /bin/sh to run the wrapper
	// that ties the command to this process.
	ErrNoShell = backend.ErrNoShell
	// ErrNoSetsid: the image has a shell but no setsid, so the command
	// cannot get a process group of its own to be ended as one.
	ErrNoSetsid = backend.ErrNoSetsid
	// ErrGuardStopped is the Cause of an exec that the guard's stop ended
	// ([Killed]), and what Exec wraps when called once the guard is
	// stopping.
	ErrGuardStopped = errors.New("the guard stopped")
)

// ExecResult is how a command run by Exec ended, and what it wrote.
type ExecResult struct {
	// Cmd is the command as given, for messages.
	Cmd    []string
	Ending Ending
	// ExitCode is the command's code when it Exited (128+n when a signal n
	// it did not ask for killed it, 127 when it was not found); -1
	// otherwise, so that no check for 0 passes by accident.
	ExitCode int
	// Cause is why the command was Killed: context.Cause of Exec's context
	// (context.DeadlineExceeded for a timeout), or ErrGuardStopped when the
	// guard stopped; nil when it Exited.
	Cause error
	// Stdout and Stderr hold at most the output limit each (1 MiB unless
	// WithOutputLimit says otherwise). Past it, the rest is read and
	// discarded while the command keeps running, and the matching Truncated
	// flag is set.
	Stdout, Stderr                   string
	StdoutTruncated, StderrTruncated bool
}

// String describes the result for a failure message: the command, how it
// ended, and the tail of each stream.
func (r ExecResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q: ", r.Cmd)
	switch r.Ending {
	case Exited:
		fmt.Fprintf(&b, "exited %d", r.ExitCode)
	case Killed:
		fmt.Fprintf(&b, "%s (%v)", r.Ending, r.Cause)
	default:
		b.WriteString(r.Ending.String())
	}
	tail(&b, "stdout", r.Stdout, r.StdoutTruncated)
	tail(&b, "stderr", r.Stderr, r.StderrTruncated)
	return b.String()
}

// tailMax is how much of a stream a message shows: the end, where the
// error usually is.
const tailMax = 2048

func tail(b *strings.Builder, name, s string, truncated bool) {
	if s == "" && !truncated {
		return
	}
	note := ""
	if truncated {
		note = ", truncated at the output limit"
	}
	if len(s) > tailMax {
		note += fmt.Sprintf(", last %d of %d bytes", tailMax, len(s))
		s = s[len(s)-tailMax:]
	}
	fmt.Fprintf(b, "\n%s%s:\n%s", name, note, strings.TrimSuffix(s, "\n"))
}

// ExecOption changes how Exec runs a command. Only this package makes
// them: With… functions.
type ExecOption interface{ applyExec(*execConfig) }

type execConfig struct {
	stdin io.Reader
	env   map[string]string
	dir   string
	user  string
	limit int
}

type execOptionFunc func(*execConfig)

func (f execOptionFunc) applyExec(c *execConfig) { f(c) }

// WithStdin feeds r to the command's standard input, closed once r is
// drained. The stdin is then the command's, not the lease's: the command
// is NOT protected if this process dies (SIGKILL, a crash, `go test
// -timeout`) and may run on in a container that outlives the test — a
// keep-alive one. A context that ends and Guard.Stop still end it, by
// signalling its process group from a second exec. Use it only for a
// command that ends when its input does, like cat or a shell reading a
// script.
func WithStdin(r io.Reader) ExecOption {
	return execOptionFunc(func(c *execConfig) { c.stdin = r })
}

// WithEnv adds variables to the command's environment, over the
// sandbox's; several WithEnv add up, the later winning.
func WithEnv(env map[string]string) ExecOption {
	return execOptionFunc(func(c *execConfig) {
		if c.env == nil {
			c.env = map[string]string{}
		}
		maps.Copy(c.env, env)
	})
}

// WithWorkingDir starts the command in dir instead of the image's
// working directory.
func WithWorkingDir(dir string) ExecOption {
	return execOptionFunc(func(c *execConfig) { c.dir = dir })
}

// WithUser runs the command as user ("nobody", "1000", "1000:1000")
// instead of the image's user.
func WithUser(user string) ExecOption {
	return execOptionFunc(func(c *execConfig) { c.user = user })
}

// WithOutputLimit keeps at most n bytes of each of stdout and stderr
// instead of 1 MiB; n <= 0 keeps the default. A command that writes more
// is not stopped: the rest is discarded and the result says so.
func WithOutputLimit(n int) ExecOption {
	return execOptionFunc(func(c *execConfig) { c.limit = n })
}

// Exec runs cmd in the sandbox and waits for it to end. Its words reach
// the command unchanged (no shell in between: pass "sh", "-c", script for
// one).
//
// A command run in a sandbox outlives the test that started it whenever
// the sandbox does — a keep-alive sandbox (Spec.Reuse) is never removed —
// so Exec ties it to this process: the command runs in a process group of
// its own under a small sh wrapper holding the exec's stdin as a lease.
// When this process dies, however it dies (SIGKILL, OOM-kill, `go test
// -timeout`), the engine closes that stdin and the wrapper ends the whole
// group: SIGTERM, a grace of 2 s for EXIT traps and flushes, SIGKILL.
// When ctx ends, and when the guard stops (Stop, the test's cleanup),
// Exec ends the command the same way and reports it: Ending is [Killed],
// and Cause says which. When the
// command exits by itself, whatever it left running in its group is ended
// too. A process that starts a session of its own (setsid, a daemon) is
// no longer in the group and is not followed.
//
// With WithStdin the stdin is the command's, not the lease's: ctx and
// Stop still end the command, this process's death does not.
//
// Note that dash and busybox sh run an EXIT trap when they exit, but not
// when a signal they do not trap kills them: a script that must clean up
// when it is ended traps TERM too (trap 'exit 143' TERM). bash runs EXIT
// traps either way.
//
// The error is for a command that could not run or whose end could not be
// confirmed; a command that failed or was killed is a result. The image
// needs /bin/sh and setsid (busybox is enough): errors.Is(err, ErrNoShell)
// and ErrNoSetsid say which is missing. On a backend that cannot run
// commands in its sandboxes, the error wraps errors.ErrUnsupported. Exec
// may be called from any goroutine, several at once.
func (g *Guard) Exec(ctx context.Context, cmd []string, opts ...ExecOption) (ExecResult, error) {
	res := ExecResult{Cmd: slices.Clone(cmd), ExitCode: -1}
	sbx := g.sandbox()
	if sbx == nil {
		return res, fmt.Errorf("sandboxtest: exec %q: the sandbox was not started", cmd)
	}
	ex, ok := sbx.(backend.Execer)
	if !ok {
		return res, fmt.Errorf("sandboxtest: exec %q in %s: this backend cannot run commands in its sandboxes: %w", cmd, g.name, errors.ErrUnsupported)
	}
	var c execConfig
	for _, o := range opts {
		o.applyExec(&c)
	}
	opt := backend.ExecOptions{Stdin: c.stdin, WorkingDir: c.dir, User: c.user, OutputLimit: c.limit}
	for _, k := range slices.Sorted(maps.Keys(c.env)) {
		opt.Env = append(opt.Env, k+"="+c.env[k])
	}

	if c.stdin == nil && g.s != nil {
		// For the run's fate: a command its lease ends when this process
		// dies is named there.
		if wd := g.s.Watchdog(); wd != nil {
			var id string
			opt.Started = func(execID string) {
				if wd.TellExec(execID, g.name) == nil {
					id = execID
				}
			}
			defer func() {
				if id != "" {
					wd.UntellExec(id, g.name)
				}
			}()
		}
	}

	ectx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	run, err := g.execs.add(cancel)
	if err != nil {
		return res, fmt.Errorf("sandboxtest: exec %q in %s: %w", cmd, g.name, err)
	}
	defer g.execs.done(run)

	out, err := ex.Exec(ectx, cmd, opt)
	res.Stdout, res.Stderr = string(out.Stdout), string(out.Stderr)
	res.StdoutTruncated, res.StderrTruncated = out.StdoutTruncated, out.StderrTruncated
	if out.Interrupted != nil {
		res.Cause = context.Cause(ectx)
	}
	switch {
	case err != nil:
		// Unknown: it never ran, or its end is not confirmed.
		return res, fmt.Errorf("sandboxtest: %w", err)
	case out.Interrupted != nil:
		res.Ending = Killed
	default:
		res.Ending, res.ExitCode = Exited, out.ExitCode
	}
	return res, nil
}

// execStopBound is how long Stop waits for the running execs to end: the
// backend's own bound after it ends one (grace and 3 s), and a margin.
const execStopBound = backend.ExecGrace + 5*time.Second

// execSet tracks the Execs running in a sandbox, so that Stop can end
// them before it stops the sandbox, and a keep-alive sandbox, which Stop
// leaves running, is left with nothing of the test's in it. Its zero value
// is ready to use.
type execSet struct {
	mu      sync.Mutex
	closed  bool
	running map[*runningExec]struct{}
}

type runningExec struct {
	cancel context.CancelCauseFunc
	ended  chan struct{}
}

func (e *execSet) add(cancel context.CancelCauseFunc) (*runningExec, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("not started: %w", ErrGuardStopped)
	}
	if e.running == nil {
		e.running = map[*runningExec]struct{}{}
	}
	r := &runningExec{cancel: cancel, ended: make(chan struct{})}
	e.running[r] = struct{}{}
	return r, nil
}

func (e *execSet) done(r *runningExec) {
	e.mu.Lock()
	delete(e.running, r)
	e.mu.Unlock()
	close(r.ended)
}

// stopAll refuses new execs, ends the running ones (their contexts end
// with ErrGuardStopped, which closes their leases) and waits for them, at
// most execStopBound or until ctx ends.
func (e *execSet) stopAll(ctx context.Context) {
	e.mu.Lock()
	e.closed = true
	list := slices.Collect(maps.Keys(e.running))
	e.mu.Unlock()
	if len(list) == 0 {
		return
	}
	for _, r := range list {
		r.cancel(ErrGuardStopped)
	}
	bound := time.NewTimer(execStopBound)
	defer bound.Stop()
	for _, r := range list {
		select {
		case <-r.ended:
		case <-bound.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
