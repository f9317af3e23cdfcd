package msb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/origin"
)

// loopback is where ports published by msb are reached: the host ports are
// picked on it, and msb forwards them from the host it runs on.
const loopback = "127.0.0.1"

const (
	// stopSlack is how long `msb stop` may take beyond the grace given to
	// the workload before it is abandoned and rm is tried anyway.
	stopSlack = 10 * time.Second
	// outputTail is how much of the attached `msb run` output is kept, for
	// the error when the sandbox never reaches Running.
	outputTail = 16 << 10
	// How often readiness polls `msb ls`: quickly at first, as the family's
	// fixed 300 ms would dominate a fast boot.
	pollFirst = 5 * time.Millisecond
	pollMax   = 250 * time.Millisecond
)

// sandbox is one msb sandbox, started (with its attached `msb run`) or
// adopted by this process.
type sandbox struct {
	d    *Driver
	name string
	// ports maps "8080/tcp" to its host port; nil for an adopted sandbox,
	// whose ports msb does not report.
	ports map[string]string
	// files is the folder of mounted files to remove with the sandbox.
	files string

	// The attached `msb run`; cmd is nil for an adopted sandbox. waitErr is
	// set before done is closed.
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	done    chan struct{}
	waitErr error
	out     *tailBuffer

	stopMu    sync.Mutex
	gone      atomic.Bool
	cleanOnce sync.Once
}

var _ backend.Sandbox = (*sandbox)(nil)

// Create starts an attached `msb run` for name and returns once msb lists
// the sandbox as Running. On error the sandbox may exist (stopped): the
// caller removes it by name.
func (d *Driver) Create(ctx context.Context, name string, spec backend.Spec) (backend.Sandbox, error) {
	if spec.WaitingFor != nil || len(spec.Customize) > 0 {
		return nil, fmt.Errorf("msb sandbox %s: Spec.WaitingFor and Spec.Customize are testcontainers-go's, for the docker backend only", name)
	}
	if len(spec.Volumes) > 0 {
		return nil, fmt.Errorf("msb sandbox %s: the msb backend has no named volumes to mount", name)
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("msb: create %s: %w", name, err)
	}
	// What made it is a label, as on Docker.
	spec.Labels = origin.FromContext(ctx).AddLabels(maps.Clone(spec.Labels))
	plan, err := planRun(name, spec)
	if err != nil {
		return nil, fmt.Errorf("msb: create %s: %w", name, err)
	}
	s := &sandbox{d: d, name: name, ports: plan.ports, files: plan.files}
	if err := d.claim(s); err != nil {
		s.cleanup()
		return nil, err
	}
	if err := s.start(plan.args); err != nil {
		d.forget(name, s)
		s.cleanup()
		return nil, fmt.Errorf("msb: create %s: %w", name, err)
	}
	if err := s.awaitRunning(ctx); err != nil {
		// Ending the supervisor stops the VM; the caller removes it.
		s.release(0)
		d.forget(name, s)
		s.cleanup()
		return nil, fmt.Errorf("msb: create %s: %w", name, err)
	}
	return s, nil
}

// start spawns the attached `msb run`. Its context is the sandbox's life,
// not the caller's: Create's deadline must not end the sandbox it made.
func (s *sandbox) start(args []string) error {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := s.d.command(ctx, args...)
	s.out = &tailBuffer{limit: outputTail}
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		cancel()
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			err = fmt.Errorf("cannot run %s (%v): %w", s.d.path, err, backend.ErrUnreachable)
		}
		return err
	}
	s.cmd, s.cancel, s.done = cmd, cancel, make(chan struct{})
	go func() {
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	return nil
}

// awaitRunning polls `msb ls --format json` until the sandbox is Running,
// the attached `msb run` exits, or ctx ends.
func (s *sandbox) awaitRunning(ctx context.Context) error {
	delay := pollFirst
	var lastErr error
	lastStatus := "not listed"
	for {
		statuses, err := s.d.list(ctx)
		if err != nil {
			lastErr = err
		} else if st, ok := statuses[s.name]; ok {
			if st == statusRunning {
				return nil
			}
			lastStatus = st
		}
		t := time.NewTimer(delay)
		select {
		case <-s.done:
			t.Stop()
			out := shown(s.out.String())
			if out == "" {
				out = "(no output)"
			}
			hint := ""
			if strings.Contains(strings.ToLower(out), "address already in use") {
				hint = " (a host port picked for it was taken meanwhile; creating the sandbox again picks new ones)"
			}
			return fmt.Errorf("msb run exited (%v) before the sandbox reached Running%s; it printed: %s", s.waitErr, hint, out)
		case <-ctx.Done():
			t.Stop()
			msg := fmt.Sprintf("sandbox did not reach Running (last seen: %s): %v", lastStatus, ctx.Err())
			if lastErr != nil {
				msg += fmt.Sprintf("; last msb ls error: %v", lastErr)
			}
			return fmt.Errorf("%s: %w", msg, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, pollMax)
	}
}

// release waits at most grace for the attached `msb run` to exit (msb stop
// ends it), then kills it. It returns once the process is gone.
func (s *sandbox) release(grace time.Duration) {
	if s.cmd == nil {
		return
	}
	if grace > 0 {
		t := time.NewTimer(grace)
		select {
		case <-s.done:
		case <-t.C:
		}
		t.Stop()
	}
	s.cancel()
	<-s.done
}

func (s *sandbox) markGone() {
	s.gone.Store(true)
	s.cleanup()
}

func (s *sandbox) cleanup() {
	s.cleanOnce.Do(func() {
		if s.files != "" {
			os.RemoveAll(s.files)
		}
	})
}

// stopArgs is `msb stop` of name, giving its workload grace (whole
// seconds, rounded up) before msb kills it; none at all: -f, at once.
func stopArgs(grace time.Duration, name string) []string {
	if grace <= 0 {
		return []string{"stop", "-f", name}
	}
	secs := (grace + time.Second - 1) / time.Second
	return []string{"stop", "-t", strconv.FormatInt(int64(secs), 10), name}
}

// Adopt returns the running sandbox of that name: this process's own when
// it started it, else one whose published ports are unknown.
func (d *Driver) Adopt(ctx context.Context, name string) (backend.Sandbox, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	statuses, err := d.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("msb: adopt %s: %w", name, err)
	}
	st, ok := statuses[name]
	if !ok {
		return nil, fmt.Errorf("msb: adopt %s: msb lists no sandbox of that name: %w", name, backend.ErrNotFound)
	}
	if st != statusRunning {
		why := backend.ErrStopped
		if st == statusCreated || st == statusStarting {
			why = backend.ErrStarting
		}
		return nil, fmt.Errorf("msb: adopt %s: the sandbox is %s, not %s: %w: %w", name, st, statusRunning, why, backend.ErrNotFound)
	}
	if s := d.tracked(name); s != nil {
		return s, nil
	}
	return &sandbox{d: d, name: name}, nil
}

func (s *sandbox) Name() string { return s.name }

// ID is the name: msb knows sandboxes by name only.
func (s *sandbox) ID() string { return s.name }

// Host is 127.0.0.1, where the host ports msb publishes were picked.
func (s *sandbox) Host() string { return loopback }

// MappedPort returns the host port publishing port ("8080/tcp" or "8080").
func (s *sandbox) MappedPort(_ context.Context, port string) (string, error) {
	p, err := parsePort(port)
	if err != nil {
		return "", fmt.Errorf("msb sandbox %s: %w", s.name, err)
	}
	if s.ports == nil {
		return "", fmt.Errorf("msb sandbox %s was adopted, not started by this process, and msb does not report which host port publishes %s: %w", s.name, p.key(), errors.ErrUnsupported)
	}
	hp, ok := s.ports[p.key()]
	if !ok {
		published := "nothing"
		if len(s.ports) > 0 {
			published = strings.Join(slices.Sorted(maps.Keys(s.ports)), ", ")
		}
		return "", fmt.Errorf("msb sandbox %s does not publish %s (it publishes %s)", s.name, p.key(), published)
	}
	return hp, nil
}

// Logs returns what `msb logs` has captured of the sandbox's workload.
func (s *sandbox) Logs(ctx context.Context) (string, error) {
	r := s.d.runRetrying(ctx, "logs", s.name)
	if r.err != nil {
		if r.contains(notFoundFragment) {
			return "", fmt.Errorf("msb sandbox %s has no logs (%v): %w", s.name, r.failure(), backend.ErrNotFound)
		}
		return "", fmt.Errorf("msb sandbox %s: %w", s.name, r.failure())
	}
	return r.stdout, nil
}

// Stop runs `msb stop` (msb's graceful shutdown, force-killing after
// grace), gives the attached supervisor grace to exit before killing it,
// runs `msb rm`, and returns nil only once `msb ls` no longer lists the
// sandbox. Idempotent.
func (s *sandbox) Stop(ctx context.Context, grace time.Duration) error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.gone.Load() {
		return nil
	}
	grace = max(grace, 0)
	stopCtx, cancel := context.WithTimeout(ctx, grace+stopSlack)
	stop := s.d.runRetrying(stopCtx, stopArgs(grace, s.name)...)
	cancel()
	s.release(grace)
	rm := s.d.runRetrying(ctx, "rm", s.name)
	if rm.err != nil && !rm.notFound() {
		if stop.err != nil && !stop.notFound() {
			return fmt.Errorf("msb: stop %s: %w (after stop failed: %v)", s.name, rm.failure(), stop.failure())
		}
		return fmt.Errorf("msb: stop %s: %w", s.name, rm.failure())
	}
	statuses, err := s.d.list(ctx)
	if err != nil {
		return fmt.Errorf("msb: stop %s: removed, but not confirmed gone: %w", s.name, err)
	}
	if st, ok := statuses[s.name]; ok {
		return fmt.Errorf("msb: stop %s: msb still lists it (status %s) after rm", s.name, st)
	}
	s.d.forget(s.name, s)
	s.markGone()
	return nil
}
