package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/docker"
)

// Guard is a started sandbox bound to the test (or suite) that started it.
type Guard struct {
	o    owner
	spec Spec
	name string
	s    *session
	sbx  backend.Sandbox
	// keepAlive: a reused sandbox, left running by Stop.
	keepAlive bool

	mu      sync.Mutex
	stopped bool
	execs   execSet
}

// Start starts a sandbox for the test and returns its guard. Its stop is
// registered with tb.Cleanup before anything is created, so it is removed
// when the test ends even if Start itself fails half-way; a failure fails
// the test with a message saying what went wrong. Behind it: a ledger line
// before creation, the process's watchdog, and the sweep of dead runs at
// the process's first use.
func Start(tb testing.TB, spec Spec) *Guard {
	tb.Helper()
	return start(tbOwner{tb}, spec)
}

func start(o owner, spec Spec) *Guard {
	o.Helper()
	g := &Guard{o: o, spec: spec}
	o.Cleanup(g.cleanup)
	if err := g.start(o.context()); err != nil {
		o.Fatalf("sandboxtest: start %s: %v", describe(spec), err)
	}
	return g
}

func describe(spec Spec) string {
	if spec.Image == "" {
		return "sandbox (no image given)"
	}
	return spec.Image
}

func (g *Guard) start(ctx context.Context) error {
	if g.spec.Image == "" {
		return errors.New("Spec.Image is empty")
	}
	s, err := getSession(ctx)
	if err != nil {
		return err
	}
	g.s = s
	if g.spec.Reuse && reuseEnabled() {
		return g.startReuse(ctx)
	}
	g.name = s.nextName()
	// The watchdog first: killed between its first ledger write and the
	// watchdog's spawn, a process would leave that write to the next
	// process's sweep. A watchdog that finds no files has nothing to do.
	if started, err := s.ensureWatchdog(); err != nil {
		g.o.Logf("sandboxtest: no watchdog for this process (%v); a crash's leftovers will be removed by the next process's sweep", err)
	} else if started {
		g.o.Logf("sandboxtest: run %s, watchdog pid %d", s.runID, s.wd.Load().PID)
	}
	if err := s.addSandbox(g.name); err != nil {
		return err
	}
	sbx, err := g.create(ctx, g.name, s.runLabels())
	if err != nil {
		// The line goes only once no sandbox of that name exists. A create
		// cut short by the context may still be finished by the engine a
		// moment later: give it that moment before looking.
		if ctx.Err() != nil {
			time.Sleep(lateCreateSettle)
		}
		fctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if ferr := s.removeAndForget(fctx, sandboxKind, []string{g.name})[0]; ferr != nil {
			err = fmt.Errorf("%w; and %v", err, ferr)
		}
		return err
	}
	g.mu.Lock()
	g.sbx = sbx
	g.mu.Unlock()
	return nil
}

// create asks the backend for the sandbox.
func (g *Guard) create(ctx context.Context, name string, labels map[string]string) (backend.Sandbox, error) {
	all := maps.Clone(g.spec.Labels)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, labels)
	bs := backend.Spec{
		Image:         g.spec.Image,
		Cmd:           g.spec.Cmd,
		Env:           g.spec.Env,
		Ports:         g.spec.Ports,
		Labels:        all,
		MemoryLimitMB: g.spec.MemoryLimitMB,
	}
	for _, f := range g.spec.Files {
		bs.Files = append(bs.Files, backend.File{GuestPath: f.GuestPath, Content: f.Content, Mode: f.Mode})
	}
	for _, n := range g.spec.Networks {
		if n == nil {
			return nil, errors.New("Spec.Networks holds a nil *Network")
		}
		if bs.Networks == nil {
			bs.Networks = map[string][]string{}
		}
		bs.Networks[n.Name()] = g.spec.Aliases
	}
	if d, ok := g.s.drv.(*docker.Driver); ok {
		var extra []testcontainers.ContainerCustomizer
		if g.spec.WaitingFor != nil {
			extra = append(extra, testcontainers.WithWaitStrategy(g.spec.WaitingFor))
		}
		extra = append(extra, g.spec.Customize...)
		sbx, err := d.CreateWith(ctx, name, bs, extra...)
		if err != nil {
			return nil, err // not a nil *docker.Sandbox in a non-nil interface
		}
		return sbx, nil
	}
	if g.spec.WaitingFor != nil || len(g.spec.Customize) > 0 {
		return nil, fmt.Errorf("Spec.WaitingFor and Spec.Customize need the docker backend; this process uses %s", g.s.drv.Name())
	}
	return g.s.drv.Create(ctx, name, bs)
}

// lateCreateSettle is how long a create interrupted by its context is given
// to be finished by the engine anyway, as the watchdog's second pass does.
const lateCreateSettle = 2 * time.Second

// Name is the sandbox's name: rz-<run-id>-<n>, or rz-reuse-<hash> for a
// keep-alive sandbox.
func (g *Guard) Name() string { return g.name }

// Host is the host published ports are reached on from this process:
// 127.0.0.1 for a local engine, TESTCONTAINERS_HOST_OVERRIDE when set; ""
// when the sandbox was not started.
func (g *Guard) Host() string {
	if g.sbx == nil {
		return ""
	}
	return g.sbx.Host()
}

// MappedPort returns the host port that guest port ("8080/tcp") is
// published on; it fails the test when there is none. Call it from the
// test's goroutine.
func (g *Guard) MappedPort(port string) string {
	g.o.Helper()
	if g.sbx == nil {
		g.o.Fatalf("sandboxtest: MappedPort(%q): the sandbox was not started", port)
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	p, err := g.sbx.MappedPort(ctx, port)
	if err != nil {
		g.o.Fatalf("sandboxtest: MappedPort(%q) of %s: %v", port, g.name, err)
	}
	return p
}

// Endpoint returns "host:port" for guest port ("8080/tcp"), ready to dial;
// it fails the test as MappedPort does. Call it from the test's goroutine.
func (g *Guard) Endpoint(port string) string {
	g.o.Helper()
	return net.JoinHostPort(g.Host(), g.MappedPort(port))
}

// Logs returns what the sandbox wrote so far; it fails the test when they
// cannot be read. Call it from the test's goroutine.
func (g *Guard) Logs() string {
	g.o.Helper()
	if g.sbx == nil {
		g.o.Fatalf("sandboxtest: Logs: the sandbox was not started")
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	l, err := g.sbx.Logs(ctx)
	if err != nil {
		g.o.Fatalf("sandboxtest: logs of %s: %v", g.name, err)
	}
	return l
}

// Sandbox is the backend's handle, for what the guard does not wrap.
func (g *Guard) Sandbox() backend.Sandbox { return g.sbx }

// Container is the testcontainers-go container on the Docker backend (nil
// otherwise, and for an adopted keep-alive container).
func (g *Guard) Container() *testcontainers.DockerContainer {
	if ds, ok := g.sbx.(*docker.Sandbox); ok {
		return ds.Container()
	}
	return nil
}

// Stop ends every Exec still running in the sandbox, then stops the sandbox
// (SIGTERM, a grace period, forced removal) and removes its ledger line once
// it is confirmed gone. A keep-alive sandbox is left running. Calling Stop
// again after it succeeded does nothing; after a failure it tries again.
func (g *Guard) Stop(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return nil
	}
	g.execs.stopAll(ctx)
	if g.keepAlive || g.s == nil || g.name == "" {
		g.stopped = true
		return nil
	}
	if g.sbx == nil {
		// Never created, or its creation failed: no handle to stop, only
		// a name to remove.
		if err := g.s.removeAndForget(ctx, sandboxKind, []string{g.name})[0]; err != nil {
			return err
		}
		g.stopped = true
		return nil
	}
	if err := g.sbx.Stop(ctx, stopGrace(g.spec.StopGrace, g.o.deadline())); err != nil {
		return fmt.Errorf("stop %s: %w (it stays in the ledger for the watchdog or the next sweep)", g.name, err)
	}
	if err := g.s.forget(sandboxKind, g.name); err != nil {
		return err
	}
	g.stopped = true
	return nil
}

func (g *Guard) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		g.o.Errorf("sandboxtest: %v", err)
	}
}
