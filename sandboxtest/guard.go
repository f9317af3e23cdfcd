package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Guard is a started sandbox bound to the test (or suite) that started it.
//
// Its methods may be called from any goroutine, but those that fail the
// test on error (MappedPort, Endpoint, Logs) must be called from the
// test's own goroutine, as t.Fatal must.
type Guard struct {
	o    owner
	spec Spec
	name string
	s    *reaper.Session
	// origin is what started it: the test and the place of its call, or
	// a suite's Setup (origin.go).
	origin origin.Origin
	// keepAlive: a reused sandbox, left running by Stop; view: a Guard.For
	// view, which stops nothing.
	keepAlive, view bool

	// lazy starts a suite's sandbox at its first use; nil for the others.
	lazy *lazy

	mu      sync.Mutex
	sbx     backend.Sandbox // set once started; read under mu (sandbox)
	stopped bool
	execs   execSet
}

// lazy runs start once, at the first do, and keeps its error for every
// later one: a suite's sandbox or network is started when a test first
// needs it, and one that could not start fails each test that does.
type lazy struct {
	once  sync.Once
	err   error
	start func() error
}

func (l *lazy) do() error {
	if l == nil {
		return nil
	}
	l.once.Do(func() { l.err = l.start() })
	return l.err
}

// Start starts a sandbox for the test and returns its guard. Its stop is
// registered with tb.Cleanup before anything is created, so it is removed
// when the test ends even if Start itself fails half-way; a failure fails
// the test with a message saying what went wrong. Behind it: a ledger line
// before creation, the process's watchdog, and the sweep of dead runs at
// the process's first use.
func Start(tb testing.TB, spec Spec) *Guard {
	tb.Helper()
	og := origin.Of(tb)
	g, note, err := start(tbOwner{tb}, spec, og)
	if note != "" {
		tb.Log(note)
	}
	if err != nil {
		tb.Fatalf("sandboxtest: start %s: %v", describe(spec, og), err)
	}
	return g
}

// start makes the guard, registers its stop with o, and starts it; it
// returns the watchdog's first-time note for o's log.
func start(o owner, spec Spec, og origin.Origin) (*Guard, string, error) {
	g := &Guard{o: o, spec: spec, origin: og}
	o.addCleanup(g.cleanup)
	note, err := g.start(o.context())
	return g, note, err
}

// describe names a sandbox to start, with what starts it, for a failure:
// "busybox (TestCheckout/eu at store_test.go:42)".
func describe(spec Spec, og origin.Origin) string {
	what := spec.Image
	if what == "" {
		what = "sandbox (no image given)"
	}
	if og.IsZero() {
		return what
	}
	return what + " (" + og.String() + ")"
}

func (g *Guard) start(ctx context.Context) (string, error) {
	if err := g.spec.check(); err != nil {
		return "", err
	}
	if err := g.spec.makeObjects(); err != nil {
		return "", err
	}
	s, err := getSession(ctx)
	if err != nil {
		return "", err
	}
	g.s = s
	// What started it goes with the create: to the run's origins, and to
	// the engine's labels.
	ctx = origin.NewContext(ctx, g.origin)
	if g.spec.Reuse && reuseEnabled() {
		return g.startReuse(ctx)
	}
	g.name = s.NextName()
	note, err := s.Create(ctx, sandboxKind, g.name, func(ctx context.Context) (string, error) {
		sbx, err := s.Driver().Create(ctx, g.name, g.backendSpec(s.RunID(), "", ""))
		if err != nil {
			return "", err
		}
		g.setSandbox(sbx)
		return sbx.ID(), nil
	})
	return watchdogNote(s, note), err
}

// watchdogNote is what the first sandbox's log says of the watchdog; a
// watchdog that could not start is told on stderr, where it is seen
// without -v.
func watchdogNote(s *reaper.Session, note *reaper.WatchdogNote) string {
	if note != nil && note.KeeperErr != nil {
		warnf("sandboxtest: no engine-side keeper for run %s (%v); the watchdog of this machine serves alone: if the machine dies, its sandboxes stay", s.RunID(), note.KeeperErr)
	}
	switch {
	case note == nil:
		return ""
	case note.Err != nil:
		warnf("sandboxtest: no watchdog for run %s (%v); if this process is killed, its sandboxes stay until the next process's sweep", s.RunID(), note.Err)
		return ""
	case note.Started && note.Keeper != "":
		return fmt.Sprintf("sandboxtest: run %s, %s watchdog pid %d, holding the lease of keeper %s", s.RunID(), note.Kind, note.PID, note.Keeper)
	case note.Started:
		return fmt.Sprintf("sandboxtest: run %s, %s watchdog pid %d", s.RunID(), note.Kind, note.PID)
	}
	return ""
}

// backendSpec is the spec as the backend takes it: marked as run runID's,
// or as the keep-alive sandbox keepAlive (with rightsize-go's extra mark).
func (g *Guard) backendSpec(runID, keepAlive, extra string) backend.Spec {
	bs := backend.Spec{
		Image:          g.spec.Image,
		Cmd:            g.spec.Cmd,
		Env:            g.spec.Env,
		Ports:          g.spec.Ports,
		Labels:         g.spec.Labels,
		RunID:          runID,
		KeepAlive:      keepAlive,
		KeepAliveExtra: extra,
		MemoryLimitMB:  g.spec.MemoryLimitMB,
		WaitingFor:     g.spec.WaitingFor,
		Customize:      g.spec.Customize,
	}
	for _, f := range g.spec.Files {
		bs.Files = append(bs.Files, backend.File{GuestPath: f.GuestPath, Content: f.Content, Mode: int64(f.Mode.Perm())})
	}
	for _, n := range g.spec.Networks {
		if bs.Networks == nil {
			bs.Networks = map[string][]string{}
		}
		bs.Networks[n.Name()] = g.spec.Aliases
	}
	for _, m := range g.spec.Mounts {
		bs.Volumes = append(bs.Volumes, backend.VolumeMount{Name: m.Volume.Name(), Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return bs
}

func (g *Guard) setSandbox(sbx backend.Sandbox) {
	g.mu.Lock()
	g.sbx = sbx
	g.mu.Unlock()
}

// sandbox is the backend's handle, nil until started. A suite's sandbox
// starts here, at its first use; one that cannot start fails its owner.
func (g *Guard) sandbox() backend.Sandbox {
	if err := g.lazy.do(); err != nil {
		if tb := g.o.testTB(); tb != nil {
			tb.Helper()
		}
		g.o.fatalf("sandboxtest: %v", err)
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sbx
}

// Name is the sandbox's name: rz-<run-id>-<n>, or rz-reuse-<hash> for a
// keep-alive sandbox.
func (g *Guard) Name() string {
	g.lazy.do() // its failure is told where the sandbox is used
	return g.name
}

// Host is where this process reaches the sandbox's published ports:
// 127.0.0.1 beside a local engine, the engine's gateway from inside a
// container, the engine's host over TCP, TESTCONTAINERS_HOST_OVERRIDE when
// set; "" when the sandbox was not started. testcontainers-go's own
// answers for a Track(t) container agree with it.
func (g *Guard) Host() string {
	if sbx := g.sandbox(); sbx != nil {
		return sbx.Host()
	}
	return ""
}

// MappedPort returns the host port that guest port ("8080/tcp") is
// published on; it fails the test when there is none.
func (g *Guard) MappedPort(port string) string {
	if tb := g.o.testTB(); tb != nil {
		tb.Helper()
	}
	sbx := g.sandbox()
	if sbx == nil {
		g.o.fatalf("sandboxtest: MappedPort(%q): the sandbox was not started", port)
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	p, err := sbx.MappedPort(ctx, port)
	if err != nil {
		g.o.fatalf("sandboxtest: MappedPort(%q) of %s: %v", port, g.name, err)
	}
	return p
}

// Endpoint returns "host:port" for guest port ("8080/tcp"), ready to dial;
// it fails the test as MappedPort does.
func (g *Guard) Endpoint(port string) string {
	if tb := g.o.testTB(); tb != nil {
		tb.Helper()
	}
	return net.JoinHostPort(g.Host(), g.MappedPort(port))
}

// Logs returns what the sandbox wrote so far; it fails the test when they
// cannot be read.
func (g *Guard) Logs() string {
	if tb := g.o.testTB(); tb != nil {
		tb.Helper()
	}
	sbx := g.sandbox()
	if sbx == nil {
		g.o.fatalf("sandboxtest: Logs: the sandbox was not started")
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	l, err := sbx.Logs(ctx)
	if err != nil {
		g.o.fatalf("sandboxtest: logs of %s: %v", g.name, err)
	}
	return l
}

// Container is the testcontainers-go container behind the sandbox, for
// what the guard does not wrap; nil on a backend without one (msb). For a
// keep-alive sandbox adopted from an earlier run it is a handle on that
// container, made for the occasion.
func (g *Guard) Container() testcontainers.Container {
	if c, ok := g.sandbox().(backend.Container); ok {
		return c.Container()
	}
	return nil
}

// Stop ends every Exec still running in the sandbox, then stops the sandbox
// (SIGTERM, a grace period, forced removal) and removes its ledger line once
// it is confirmed gone. A keep-alive sandbox is left running, and so is the
// sandbox behind a Guard.For view. Calling Stop again after it succeeded
// does nothing; after a failure it tries again. On an engine that holds the
// run's claim (Kubernetes), a sandbox whose claim was lost while the test
// held it (its Lease deleted, or its renewal refused) is stopped and
// forgotten, and Stop still fails saying so: the cluster may have removed
// it under the test.
func (g *Guard) Stop(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return nil
	}
	g.execs.stopAll(ctx)
	if g.keepAlive && g.sbx != nil {
		g.s.TouchKeepAliveUse(g.name, time.Now())
	}
	if g.keepAlive || g.view || g.s == nil || g.name == "" {
		g.stopped = true
		return nil
	}
	if g.sbx == nil || g.sbx.ID() == "" {
		// Never created, or its creation failed: no handle to stop, only
		// a name to remove where the engine shows it is this run's.
		if err := g.s.Release(ctx, sandboxKind, []string{g.name})[0]; err != nil {
			return err
		}
		g.stopped = true
		return nil
	}
	// A claim lost is a stop done: the sandbox is gone, but the engine may
	// have removed it while the test held it, and the test must fail.
	lost := g.sbx.Stop(ctx, stopGrace(g.spec.StopGrace, g.o.deadline()))
	if lost != nil && !errors.Is(lost, backend.ErrClaimLost) {
		return fmt.Errorf("stop %s: %w (it stays in the ledger for the watchdog or the next sweep)", g.name, lost)
	}
	if err := g.s.Forget(sandboxKind, g.name); err != nil {
		return err
	}
	g.stopped = true
	if lost != nil {
		return fmt.Errorf("stop %s: %w", g.name, lost)
	}
	return nil
}

func (g *Guard) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		g.o.errorf("sandboxtest: %v", err)
	}
}

// For returns a view of g bound to tb: a failure of its methods fails tb
// (instead of ending the binary, for a suite's guard), and its Stop, or the
// end of tb, leaves the sandbox running, as it belongs to whoever started
// it. Execs started through the view end with tb.
//
//	func TestQuery(t *testing.T) {
//		addr := db.For(t).Endpoint("5432/tcp")
//		…
//	}
func (g *Guard) For(tb testing.TB) *Guard {
	tb.Helper()
	if err := g.lazy.do(); err != nil {
		tb.Fatalf("sandboxtest: the suite's sandbox: %v", err)
	}
	v := &Guard{o: tbOwner{tb}, spec: g.spec, name: g.name, s: g.s, origin: g.origin, sbx: g.sandbox(), view: true}
	tb.Cleanup(v.cleanup)
	return v
}
