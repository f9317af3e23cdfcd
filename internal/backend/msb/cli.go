package msb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/capbuf"
	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/internal/names"
)

// ErrInvalidName is wrapped by every refusal of a sandbox name that the
// family's grammar refuses (internal/names: what the ledger would not keep
// either); nothing is run for such a name. A name that passes cannot be
// read as a flag, a path or more than one word.
var ErrInvalidName = errors.New("invalid sandbox name")

func checkName(name string) error {
	if !names.Valid(name) {
		return fmt.Errorf("msb: refusing sandbox name %q (a name is %s): %w", name, names.Rule, ErrInvalidName)
	}
	return nil
}

// Output fragments msb prints, as fixed strings.
const (
	// dbErrorFragment is msb's transient state-database failure: retried
	// once after retryDelay. msb 0.6.18 prints `error: runtime error:
	// database error: ... database is locked` once its own retries of a
	// locked database are spent (TestRealDatabaseErrorRetriedOnce);
	// earlier releases `error: database error: ...`.
	dbErrorFragment = "error: database error:"
	// notFoundFragment is msb's word for a name it has no sandbox of.
	notFoundFragment = "sandbox not found"
)

const (
	retryDelay = 500 * time.Millisecond
	// waitDelay bounds how long a finished msb may keep its output pipes
	// open through a child of its own.
	waitDelay = 2 * time.Second
	// maxOutput bounds what is kept of one command's stdout or stderr.
	maxOutput = 8 << 20
	// maxShown bounds the output quoted in an error message.
	maxShown = 2048
)

// result is one finished msb invocation.
type result struct {
	args   []string
	stdout string
	stderr string
	err    error // nil on exit status 0
}

func (r result) output() string { return r.stderr + r.stdout }

func (r result) contains(fragment string) bool { return strings.Contains(r.output(), fragment) }

func (r result) notFound() bool { return r.err != nil && r.contains(notFoundFragment) }

// failure describes a failed invocation: the command, how it ended, and
// what it printed (trimmed and bounded).
func (r result) failure() error {
	out := shown(r.output())
	if out == "" {
		out = "(no output)"
	}
	return fmt.Errorf("msb %s: %w: %s", strings.Join(r.args, " "), r.err, out)
}

// command is msb with args, each one argument, no shell, on the driver's
// home: the one it was opened on, whatever the environment says later.
func (d *Driver) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, d.path, args...)
	if d.home != "" {
		cmd.Env = envlist.Merge(os.Environ(), EnvHome+"="+d.home)
	}
	return cmd
}

// run runs msb once with args.
func (d *Driver) run(ctx context.Context, args ...string) result {
	cmd := d.command(ctx, args...)
	stdout := capbuf.New(maxOutput)
	stderr := capbuf.New(maxOutput)
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	if err != nil {
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
			err = fmt.Errorf("cannot run %s (%v): %w", d.path, err, backend.ErrUnreachable)
		}
	}
	return result{args: args, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// runRetrying runs msb once, and once more after retryDelay when the first
// run printed msb's state-database error. It returns the last run.
func (d *Driver) runRetrying(ctx context.Context, args ...string) result {
	r := d.run(ctx, args...)
	if !r.contains(dbErrorFragment) {
		return r
	}
	t := time.NewTimer(retryDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		r.err = fmt.Errorf("%w (before retrying: %v)", ctx.Err(), r.err)
		return r
	case <-t.C:
	}
	return d.run(ctx, args...)
}

// shown trims s and bounds it to about maxShown bytes, keeping its head and
// its tail, where msb puts its error line.
func shown(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxShown {
		return s
	}
	half := maxShown / 2
	cut := len(s) - 2*half
	return strings.ToValidUTF8(s[:half], "") + fmt.Sprintf(" […%d bytes…] ", cut) + strings.ToValidUTF8(s[len(s)-half:], "")
}

// tailBuffer keeps the last limit bytes written to it; safe for concurrent
// use, as the attached `msb run` writes while Create may read.
type tailBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.ToValidUTF8(string(b.buf), "")
}
