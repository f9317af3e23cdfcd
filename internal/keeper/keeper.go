package keeper

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
)

const (
	// LabelKeeper marks a keeper container; its value is the run id.
	LabelKeeper = "dev.rightsize.keeper"
	// LabelLease is a keeper's lease timeout, as a Go duration: what its
	// holder paces its heartbeats by.
	LabelLease = "dev.rightsize.keeper.lease"
	// NamePrefix starts every keeper's name: rz-keeper-<run id>.
	NamePrefix = "rz-keeper-"

	// DefaultSettle is how long after its first removals a keeper looks
	// again for what the engine created after the lease ended (the
	// watchdog's own second look waits as long).
	DefaultSettle = 2 * time.Second
	// FirstHoldWait is how long a keeper waits for its first holder,
	// unless its lease timeout is longer, before it ends as one whose
	// holder died: a process's start and an exec, which an engine under
	// load makes longer than a short lease timeout (seen in CI: 11 s for
	// a container's start, against a 2 s lease). A starter waits for the
	// hold (WaitHeld) as long, and no longer.
	FirstHoldWait = 30 * time.Second

	// readyTimeout bounds the wait for a started keeper to say whether it
	// reached its engine.
	readyTimeout = 30 * time.Second
	// removeWait bounds Remove's wait for a keeper the engine is removing.
	removeWait = 10 * time.Second
)

// The environment of the keeper program (program/main.go reads it).
const (
	envRun    = "RIGHTSIZE_KEEPER_RUN"
	envSettle = "RIGHTSIZE_KEEPER_SETTLE"
	envFirst  = "RIGHTSIZE_KEEPER_FIRST_HOLD"
	envNonce  = "RIGHTSIZE_KEEPER_NONCE"
	envLease  = "RIGHTSIZE_KEEPER_LEASE"
	envSocket = "RIGHTSIZE_KEEPER_SOCKET"
)

var (
	// ErrRefused is wrapped by Start's error when the engine would not run
	// a working keeper: it refused the container (the socket's mount, a
	// policy), or the keeper could not reach its own engine through the
	// socket. The caller does without a keeper, and says so.
	ErrRefused = errors.New("the engine refused the keeper")
	// ErrExists is wrapped by Start's error when the run has a keeper on
	// that engine already.
	ErrExists = errors.New("the run has a keeper already")
	// ErrNotKeeper is wrapped by Hold's error when what it was given is
	// not a running keeper.
	ErrNotKeeper = errors.New("not a running keeper")
)

// Options says how to start a keeper; the zero value is the usual keeper.
type Options struct {
	// Image is the keeper image; "" is Ensure's, built when missing.
	Image string
	// Socket is the engine's socket on the engine's host; "" is
	// SocketPath's answer.
	Socket string
	// LeaseTimeout is how long the keeper waits for a heartbeat; 0 is
	// LeaseTimeout's (RIGHTSIZE_LEASE_TIMEOUT, or 10 s).
	LeaseTimeout time.Duration
	// FirstHold is how long the keeper waits for its first holder; 0 is
	// FirstHoldWait, or the lease timeout when that is longer.
	FirstHold time.Duration
	// Settle is how long after its first removals the keeper looks again;
	// 0 is DefaultSettle, a negative value none.
	Settle time.Duration
	// Secret is the lease's secret (NewSecret's); "" is a new one. Only
	// a holder that knows it takes the lease.
	Secret string
	// Started, when set, is called once the engine created the keeper,
	// before Start starts it and waits for it to say it reached its
	// engine: a holder started then (its process) gets ready while the
	// keeper does; Hold waits for it to start, and its hello for it to
	// answer, once it knows whether it can reach its engine. Called at
	// most once; a holder should find the keeper by its name, which a
	// second try at its start keeps.
	Started func(*Keeper)
}

// Keeper is a started keeper of one run.
type Keeper struct {
	// ID and Name are the keeper container's; Name is NamePrefix+RunID.
	ID, Name string
	RunID    string
	// Image, Socket, LeaseTimeout and FirstHold are what it was started
	// with.
	Image        string
	Socket       string
	LeaseTimeout time.Duration
	FirstHold    time.Duration
	// Secret is its lease's: what Hold needs. The keeper knows its hash
	// alone.
	Secret string

	cli *client.Client
}

// Start starts run runID's keeper on the engine cli talks to, and returns
// once the keeper has reached its engine through the mounted socket. Until
// a holder takes its lease (Hold), the keeper waits for one for its
// FirstHold, then ends as if its holder had died: what carries the run's
// label is removed. Any error after the container was created removes it
// again.
func Start(ctx context.Context, cli *client.Client, runID string, opts Options) (*Keeper, error) {
	name := NamePrefix + runID
	if !ledger.ValidRunID(runID) || !names.Valid(name) {
		return nil, fmt.Errorf("keeper: run id %q cannot name a keeper (%s)", runID, names.Rule)
	}
	timeout := opts.LeaseTimeout
	if timeout == 0 {
		var err error
		if timeout, err = LeaseTimeout(); err != nil {
			return nil, fmt.Errorf("keeper: %w", err)
		}
	} else if err := checkLeaseTimeout(timeout); err != nil {
		return nil, fmt.Errorf("keeper: %w", err)
	}
	first := opts.FirstHold
	if first <= 0 {
		first = max(FirstHoldWait, timeout)
	}
	settle := opts.Settle
	switch {
	case settle == 0:
		settle = DefaultSettle
	case settle < 0:
		settle = 0
	}
	k := &Keeper{Name: name, RunID: runID, Image: opts.Image, Socket: opts.Socket, LeaseTimeout: timeout, FirstHold: first, Secret: opts.Secret, cli: cli}
	var err error
	if k.Secret == "" {
		if k.Secret, err = NewSecret(); err != nil {
			return nil, fmt.Errorf("keeper: %w", err)
		}
	} else if !validSecret(k.Secret) {
		return nil, errors.New("keeper: the lease's secret is not one of NewSecret's")
	}
	if k.Image == "" {
		if k.Image, err = Ensure(ctx, cli); err != nil {
			return nil, err
		}
	}
	if k.Socket == "" {
		k.Socket = SocketPath(ctx, cli)
	}
	// The engine's runtime can fail a start for reasons of its own (a
	// hook of its network setup losing a race with the host, seen once in
	// CI as "error running hook #0 … no such file or directory"); the
	// container is then removed. One more try costs a create and a start
	// before the run does without a keeper.
	once := opts.Started
	if once != nil {
		var called bool
		once = func(k *Keeper) {
			if !called {
				called = true
				opts.Started(k)
			}
		}
	}
	err = k.createAndStart(ctx, settle, once)
	if sf := (*startFailed)(nil); errors.As(err, &sf) {
		err = k.createAndStart(ctx, settle, once)
	}
	if err != nil {
		return nil, err
	}
	return k, nil
}

// startFailed is createAndStart's error when the engine took the keeper's
// container but failed to start it.
type startFailed struct{ err error }

func (e *startFailed) Error() string { return e.err.Error() }
func (e *startFailed) Unwrap() error { return e.err }

// createAndStart creates k's container and starts it (start); any error
// after the create removes the container again. A *startFailed error
// comes before started is called.
func (k *Keeper) createAndStart(ctx context.Context, settle time.Duration, started func(*Keeper)) error {
	nonce := make([]byte, 8)
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("keeper: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := k.cli.ContainerCreate(cctx, client.ContainerCreateOptions{
		Name: k.Name,
		Config: &container.Config{
			Image: k.Image,
			Env: []string{
				envRun + "=" + k.RunID,
				EnvLeaseTimeout + "=" + k.LeaseTimeout.String(),
				envFirst + "=" + k.FirstHold.String(),
				envSettle + "=" + settle.String(),
				envNonce + "=" + hex.EncodeToString(nonce),
				envLease + "=" + secretHash(k.Secret),
				envSocket + "=" + socketInside,
			},
			// It must never carry the run's own label: it would remove
			// itself among the run's containers, and a sweep would take
			// it for one of them.
			Labels: map[string]string{LabelKeeper: k.RunID, LabelLease: k.LeaseTimeout.String()},
			// No stdin: the lease is an exec's (Hold), so that a docker
			// attach by anyone, its input at its end, reaches nothing.
			StopSignal: "SIGTERM",
			// No network at all (beside NetworkMode "none" below, which
			// Podman reads): Docker then gives the container no network
			// sandbox and does not run its own binary again as the
			// container's start hook (libnetwork-setkey), which was
			// about half of a keeper's start on Docker 20.10.
			NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{
			// Not auto-removed: a keeper that was stopped stays, stopped,
			// as the sign that the run had a keeper until then (Orphans),
			// and its holder starts it again (Revive). A keeper whose
			// lease ended removes itself once it has removed the run.
			//
			// A mount, not a bind: a socket path the engine's host does
			// not have is an error, never a folder made there.
			Mounts: []mount.Mount{{Type: mount.TypeBind, Source: k.Socket, Target: socketInside}},
			// It talks to the engine through the socket alone.
			NetworkMode:    "none",
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			// SELinux hosts (Podman on Fedora) deny a labelled container
			// the engine's socket, as they would Ryuk.
			SecurityOpt: []string{"no-new-privileges", "label=disable"},
		},
	})
	if err != nil {
		if errors.Is(docker.Classify("create", err), backend.ErrNameTaken) {
			return fmt.Errorf("keeper %s: %w: %v", k.Name, ErrExists, err)
		}
		if client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("keeper %s: creating it: %w", k.Name, err)
		}
		return fmt.Errorf("keeper %s: %w: creating it (socket %s): %v", k.Name, ErrRefused, k.Socket, err)
	}
	k.ID = res.ID
	if started != nil {
		started(k)
	}
	if err := k.start(ctx); err != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer rcancel()
		if rerr := k.Remove(rctx); rerr != nil {
			// Still there: a second create of its name would fail, and
			// hide this error behind ErrExists. No retry.
			if sf := (*startFailed)(nil); errors.As(err, &sf) {
				err = sf.err
			}
			return fmt.Errorf("%w (and removing it: %v)", err, rerr)
		}
		return err
	}
	return nil
}

// start starts the created keeper and waits for it to say whether it
// reached its engine.
func (k *Keeper) start(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := k.cli.ContainerStart(sctx, k.ID, client.ContainerStartOptions{}); err != nil {
		if client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("keeper %s: starting it: %w", k.Name, err)
		}
		return &startFailed{fmt.Errorf("keeper %s: %w: starting it (socket %s): %v", k.Name, ErrRefused, k.Socket, err)}
	}
	line, err := k.followLine(ctx, readyTimeout, func(l string) bool {
		return strings.HasPrefix(l, "ready") || strings.HasPrefix(l, "error:")
	})
	switch {
	case strings.HasPrefix(line, "ready"):
		return nil
	case strings.HasPrefix(line, "error:"):
		return fmt.Errorf("keeper %s: %w: %s (it mounts %s of the engine's host; %s names another)", k.Name, ErrRefused, strings.TrimSpace(strings.TrimPrefix(line, "error:")), k.Socket, EnvSocketOverride)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("keeper %s: it did not say it was ready within %s", k.Name, readyTimeout)
	default:
		return fmt.Errorf("keeper %s: it ended without saying it was ready (%q, %v)", k.Name, line, err)
	}
}

// WaitHeld returns once the keeper has said that a holder took its lease
// (Hold, from this process or another), or why it cannot: wait passed,
// ctx ended, or the keeper ended.
func (k *Keeper) WaitHeld(ctx context.Context, wait time.Duration) error {
	line, err := k.followLine(ctx, wait, func(l string) bool { return l == "held" })
	if line == "held" {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("keeper %s: nobody took its lease within %s", k.Name, wait)
	}
	return fmt.Errorf("keeper %s: waiting for its holder: %w", k.Name, err)
}

// followLine returns the first line (trimmed) of the keeper's stdout, from
// its start, that want accepts, or why there was none within wait. It
// reads the log, not an attach (an attach that ends would end the
// keeper's stdin on Podman), and reads it whole every few milliseconds
// rather than following it: Podman's follow hands over a new line about a
// quarter of a second after it was written, twice in a first sandbox
// ("ready", then "held"; BENCHMARKS.md).
func (k *Keeper) followLine(ctx context.Context, wait time.Duration, want func(string) bool) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	every, last := 2*time.Millisecond, ""
	for polls := 0; ; polls++ {
		lines, err := k.logLines(rctx)
		for _, l := range lines {
			if want(l) {
				return l, nil
			}
			last = l
		}
		if err == nil && polls%8 == 7 {
			// Now and then: a keeper that ended says nothing more.
			if _, running, ierr := k.state(rctx); ierr == nil && !running {
				lines, _ = k.logLines(rctx)
				for _, l := range lines {
					if want(l) {
						return l, nil
					}
				}
				err = errors.New("the keeper ended")
			}
		}
		if err != nil {
			if rctx.Err() != nil {
				return last, rctx.Err()
			}
			return last, err
		}
		select {
		case <-rctx.Done():
			return last, rctx.Err()
		case <-time.After(every):
		}
		every = min(2*every, 50*time.Millisecond)
	}
}

// logLines is the keeper's stdout so far, trimmed lines, the first 64 KiB.
func (k *Keeper) logLines(ctx context.Context) ([]string, error) {
	logs, err := k.cli.ContainerLogs(ctx, k.ID, client.ContainerLogsOptions{ShowStdout: true})
	if err != nil {
		if errors.Is(docker.Classify("logs", err), backend.ErrNotFound) {
			return nil, errors.New("the keeper ended")
		}
		return nil, fmt.Errorf("reading its log: %w", err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&limitWriter{w: &out, n: 1 << 16}, io.Discard, logs); err != nil && !errors.Is(err, errFull) {
		return nil, fmt.Errorf("reading its log: %w", err)
	}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// state is whether the keeper's container exists and runs.
func (k *Keeper) state(ctx context.Context) (exists, running bool, err error) {
	res, err := k.cli.ContainerInspect(ctx, k.ID, client.ContainerInspectOptions{})
	if err != nil {
		if errors.Is(docker.Classify("inspect", err), backend.ErrNotFound) {
			return false, false, nil
		}
		return false, false, err
	}
	return true, res.Container.State != nil && res.Container.State.Running, nil
}

// errFull is limitWriter's: what was kept is all that is read.
var errFull = errors.New("full")

// limitWriter keeps the first n bytes written to it.
type limitWriter struct {
	w *bytes.Buffer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.w.Len()+len(p) > l.n {
		l.w.Write(p[:l.n-l.w.Len()])
		return 0, errFull
	}
	return l.w.Write(p)
}

// Hold takes the keeper's lease, from this process (see the package's
// Hold).
func (k *Keeper) Hold(ctx context.Context) (*Lease, error) { return Hold(ctx, k.cli, k.ID, k.Secret) }

// Revive makes run runID's keeper run again on the engine cli talks to,
// for a holder whose lease ended while its run lives (the keeper was
// stopped, the engine restarted, the lease lapsed): a keeper that is
// there, stopped, is started again, with what it was made with; one that
// is gone is started anew (Start) with opts, whose Secret must be the
// run's. It returns the keeper's id once it runs; its lease is then to be
// held again (Hold). A keeper that runs is left as it is.
func Revive(ctx context.Context, cli *client.Client, runID string, opts Options) (string, error) {
	name := NamePrefix + runID
	if !ledger.ValidRunID(runID) || !names.Valid(name) {
		return "", fmt.Errorf("keeper: run id %q cannot name a keeper (%s)", runID, names.Rule)
	}
	ictx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := cli.ContainerInspect(ictx, name, client.ContainerInspectOptions{})
	switch {
	case errors.Is(docker.Classify("inspect", err), backend.ErrNotFound):
		k, err := Start(ctx, cli, runID, opts)
		if err != nil {
			return "", err
		}
		return k.ID, nil
	case err != nil:
		return "", fmt.Errorf("keeper %s: %w", name, err)
	case res.Container.Config == nil || res.Container.Config.Labels[LabelKeeper] != runID:
		return "", fmt.Errorf("keeper %s: %w: it has no %s=%s label", name, ErrNotKeeper, LabelKeeper, runID)
	case res.Container.State != nil && res.Container.State.Running:
		return res.Container.ID, nil
	}
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := cli.ContainerStart(sctx, res.Container.ID, client.ContainerStartOptions{}); err != nil {
		return "", fmt.Errorf("keeper %s: starting it again: %w", name, err)
	}
	return res.Container.ID, nil
}

// Remove removes the keeper at once, without its removing anything: for a
// keeper its starter will not use after all. A keeper already gone, or
// going, is not an error.
func (k *Keeper) Remove(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := k.cli.ContainerRemove(ctx, k.ID, client.ContainerRemoveOptions{Force: true})
	if err == nil || errors.Is(docker.Classify("remove", err), backend.ErrNotFound) {
		return nil
	}
	// A keeper that has just ended is removing itself, and Podman refuses
	// a second removal meanwhile: what counts is that it goes.
	for deadline := time.Now().Add(removeWait); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		if _, ierr := k.cli.ContainerInspect(ctx, k.ID, client.ContainerInspectOptions{}); errors.Is(docker.Classify("inspect", ierr), backend.ErrNotFound) {
			return nil
		}
	}
	return fmt.Errorf("keeper %s: removing it: %w", k.Name, err)
}

// RemoveIfStopped removes run runID's keeper when it is on the engine cli
// talks to but does not run (stopped, or never started): for its holder,
// once it has let go. One that runs, or is gone, is left.
func RemoveIfStopped(ctx context.Context, cli *client.Client, runID string) error {
	name := NamePrefix + runID
	ictx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := cli.ContainerInspect(ictx, name, client.ContainerInspectOptions{})
	switch {
	case errors.Is(docker.Classify("inspect", err), backend.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("keeper %s: %w", name, err)
	case res.Container.Config == nil || res.Container.Config.Labels[LabelKeeper] != runID:
		return fmt.Errorf("keeper %s: %w: it has no %s=%s label", name, ErrNotKeeper, LabelKeeper, runID)
	case res.Container.State != nil && (res.Container.State.Running || res.Container.State.Restarting):
		return nil
	}
	return (&Keeper{ID: res.Container.ID, Name: name, cli: cli}).Remove(ctx)
}

// Info is a keeper found on an engine.
type Info struct {
	ID, Name, RunID string
	// State is the engine's word: running, exited, …
	State string
	// LeaseTimeout is 0 when its label does not say.
	LeaseTimeout time.Duration
	Created      time.Time
}

// List returns the keepers on the engine cli talks to, running or not.
func List(ctx context.Context, cli *client.Client) ([]Info, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelKeeper)})
	if err != nil {
		return nil, fmt.Errorf("keeper: listing keepers: %w", err)
	}
	var out []Info
	for _, c := range res.Items {
		run := c.Labels[LabelKeeper]
		if run == "" {
			continue
		}
		in := Info{ID: c.ID, RunID: run, State: string(c.State), Created: time.Unix(c.Created, 0)}
		if len(c.Names) > 0 {
			in.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		in.LeaseTimeout, _ = time.ParseDuration(c.Labels[LabelLease])
		out = append(out, in)
	}
	return out, nil
}
