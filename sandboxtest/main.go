package sandboxtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/backend/docker"
)

// exit is os.Exit, replaced by tests of Main.
var exit = os.Exit

// stderr is where Main and a Suite report failures, and stdout where a Suite
// logs; replaced by tests. They are functions so that a change of
// os.Stderr (testing makes it os.Stdout under -test.v=test2json) is seen.
var (
	stderr = func() io.Writer { return os.Stderr }
	stdout = func() io.Writer { return os.Stdout }
)

// Main runs a package's tests from TestMain with sandboxes that outlive no
// one:
//
//	func TestMain(m *testing.M) { sandboxtest.Main(m) }
//
// or, with sandboxes shared by every test of the package:
//
//	var db *sandboxtest.Guard
//
//	func TestMain(m *testing.M) {
//		sandboxtest.Main(m, func(s *sandboxtest.Suite) {
//			db = s.Start(sandboxtest.Spec{Image: "postgres:16", Ports: []string{"5432/tcp"}})
//		})
//	}
//
// It parses the test flags (so setup may call testing.Short), sweeps what
// dead runs left on this backend, runs setup, runs the tests, then stops
// what is still up — Shared sandboxes, then the suite's sandboxes and
// networks last in first out, then anything else labelled with this run —
// and exits with the tests' code, or 1 when stopping something failed.
//
// When setup fails (Suite.Fatalf, a Suite.Start or NewNetwork that cannot
// start, Suite.Errorf, a panic), Main prints one line naming the cause,
// removes what setup had started, and exits 1 without running a test.
// Setup is bounded by -test.timeout, like the tests; with -test.list it is
// not run at all.
//
// When the binary does not reach the end of Main (a test panics, `go test
// -timeout` fires, os.Exit is called elsewhere, SIGKILL), the watchdog
// removes the run's sandboxes and networks within about a second, as for
// any other.
func Main(m *testing.M, setup ...func(*Suite)) {
	exit(runMain(m, setup))
}

// runner is the part of *testing.M that Main uses.
type runner interface{ Run() int }

// Run gives a program that is not a test binary — a demo, a development
// tool started with `go run` that needs a database while it runs — what
// Main gives a test binary: it sweeps what dead runs left, runs setup (a
// failure prints one line and returns 1, after removing what setup
// started), runs body, then removes everything of this run and returns
// body's code (1 when stopping something failed). A process that dies
// before Run returns leaves its sandboxes to the watchdog, as a test binary
// does. Guards started by setup report failures after setup by panicking,
// as a Suite's do in tests.
func Run(body func() int, setup ...func(*Suite)) int {
	return runMain(runnerFunc(body), setup)
}

type runnerFunc func() int

func (f runnerFunc) Run() int { return f() }

func runMain(m runner, setup []func(*Suite)) int {
	if testing.Testing() && !flag.Parsed() {
		flag.Parse()
	}
	if testFlag("test.list") != "" {
		// Listing runs no test: nothing to sweep, nothing to share.
		return m.Run()
	}
	ctx := context.Background()
	if _, err := getSession(ctx); err != nil {
		if len(setup) > 0 {
			fmt.Fprintf(stderr(), "sandboxtest: suite setup failed: %s\n", oneLine(err.Error()))
			return 1
		}
		// Tests that start sandboxes will report it; others may pass.
		fmt.Fprintf(stderr(), "sandboxtest: no sandboxes in this run: %s\n", oneLine(err.Error()))
	}

	setupCtx, cancel := context.WithCancel(ctx)
	if d := testTimeout(); d > 0 {
		setupCtx, cancel = context.WithTimeout(ctx, d)
	}
	suite := &Suite{ctx: setupCtx}
	for _, fn := range setup {
		if msg, ok := suite.setup(fn); !ok {
			if errors.Is(setupCtx.Err(), context.DeadlineExceeded) {
				msg += fmt.Sprintf(" (setup ran past -test.timeout=%v)", testTimeout())
			}
			cancel()
			fmt.Fprintf(stderr(), "sandboxtest: suite setup failed: %s\n", msg)
			suite.close()
			if err := closeRun(ctx); err != nil {
				fmt.Fprintf(stderr(), "sandboxtest: %s\n", oneLine(err.Error()))
			}
			return 1
		}
	}
	cancel()
	// Setup's deadline is setup's alone: a Suite.Start made later, from a
	// test, is bounded by the test's own -timeout alarm.
	suite.mu.Lock()
	suite.ctx = ctx
	suite.mu.Unlock()

	code := m.Run()

	// Shared sandboxes first: they may have joined a suite network, which
	// cannot go while they are attached.
	ok := shared.close()
	ok = suite.close() && ok
	if err := closeRun(ctx); err != nil {
		fmt.Fprintf(stderr(), "sandboxtest: %s\n", oneLine(err.Error()))
		ok = false
	}
	if code == 0 && (!ok || suite.failed()) {
		code = 1
	}
	return code
}

// testFlag is the value of a flag of package testing ("" when it is not
// defined, as outside a test binary).
func testFlag(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

func testTimeout() time.Duration {
	if f := flag.Lookup("test.timeout"); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			if d, ok := g.Get().(time.Duration); ok {
				return d
			}
		}
	}
	return 0
}

// oneLine joins the lines of a message with "; " (a space after a colon),
// so that a failure is one line of the test output whatever an engine's
// error looks like.
func oneLine(s string) string {
	var b strings.Builder
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// closeRun removes whatever this run still lists, then whatever carries its
// label without being listed.
func closeRun(ctx context.Context) error {
	sessMu.Lock()
	s := sess
	sessMu.Unlock()
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	var errs []error
	if s.run != nil {
		// Sandboxes first: a network cannot go while one is attached.
		errs = append(errs, s.removeAndForget(ctx, sandboxKind, s.run.Sandboxes())...)
		errs = append(errs, s.removeAndForget(ctx, networkKind, s.run.Networks())...)
	}
	if d, ok := s.drv.(*docker.Driver); ok {
		if _, err := d.CloseRun(ctx, s.runID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing run %s: %w", s.runID, err)
	}
	return nil
}

// Suite is what Main's setup starts shared sandboxes and networks through.
// They live until the tests are done, and Main stops them, last in first
// out, before the binary exits.
//
// In setup, a Suite behaves like a test: Fatalf ends setup (from setup's
// goroutine, as t.Fatalf ends a test), Errorf marks it failed and lets it
// go on, Cleanup registers what to run when Main closes the suite, Logf
// prints with -test.v.
//
// The guards a Suite returns report to the suite, which has no test to
// fail: used from a test, a guard method that fails (MappedPort of a port
// that is not published, say) panics with the message, which ends the
// whole test binary (the watchdog then removes the sandboxes). Call the
// guard's For(t) in the test to have failures fail that test instead.
type Suite struct {
	mu       sync.Mutex
	ctx      context.Context
	cleanups []func()
	inSetup  bool
	setupErr []string // Errorf and Fatalf in setup
	errs     []string // Errorf after setup
}

// Start starts a sandbox shared by the package's tests. When it cannot
// start, setup ends there and Main exits 1 with the cause.
func (s *Suite) Start(spec Spec) *Guard { return start(s, spec) }

// NewNetwork creates a network shared by the package's tests; sandboxes
// of the suite and Shared sandboxes can join it.
func (s *Suite) NewNetwork() *Network { return newNetwork(s) }

// setup runs fn in a goroutine of its own, so that Fatalf can end it the
// way t.FailNow ends a test, and reports why it failed, in one line.
func (s *Suite) setup(fn func(*Suite)) (string, bool) {
	s.mu.Lock()
	s.inSetup, s.setupErr = true, nil
	s.mu.Unlock()
	done := make(chan struct{})
	var panicked any
	var site string
	var stack []byte
	go func() {
		defer close(done)
		defer func() {
			if panicked = recover(); panicked != nil {
				site, stack = panicSite(), debug.Stack()
			}
		}()
		fn(s)
	}()
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inSetup = false
	switch {
	case panicked != nil:
		// The stack is a log, for -test.v: the failure itself is one line.
		s.Logf("sandboxtest: the panic of the suite's setup:\n%s", stack)
		msg := "panic"
		if site != "" {
			msg += " at " + site
		}
		return oneLine(fmt.Sprintf("%s: %v", msg, panicked)), false
	case len(s.setupErr) > 0:
		return oneLine(strings.Join(s.setupErr, "; ")), false
	}
	return "", true
}

// panicSite is file:line of the function that panicked, called from the
// deferred function that recovered.
func panicSite() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	panicking := false
	for {
		f, more := frames.Next()
		if panicking && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
		}
		if f.Function == "runtime.gopanic" {
			panicking = true
		}
		if !more {
			return ""
		}
	}
}

// close runs the suite's cleanups, last in first out; false when one
// reported an error (already printed).
func (s *Suite) close() bool {
	s.mu.Lock()
	cl := slices.Clone(s.cleanups)
	s.cleanups = nil
	before := len(s.errs)
	s.mu.Unlock()
	for i := len(cl) - 1; i >= 0; i-- {
		cl[i]()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.errs) == before
}

// failed reports whether Errorf was called after setup.
func (s *Suite) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.errs) > 0
}

// Helper does nothing; it is there so that a Suite can own guards.
func (s *Suite) Helper() {}

// Cleanup registers fn to run when Main closes the suite, after the tests,
// last in first out with the suite's sandboxes and networks.
func (s *Suite) Cleanup(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, fn)
}

// Fatalf ends setup with a failure: Main prints the message and exits 1.
// Called after setup (from a test, through one of the suite's guards), it
// panics with the message, as there is no test of the suite's to fail.
func (s *Suite) Fatalf(format string, args ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, args...), "sandboxtest: ")
	s.mu.Lock()
	inSetup := s.inSetup
	if inSetup {
		s.setupErr = append(s.setupErr, msg)
	}
	s.mu.Unlock()
	if inSetup {
		runtime.Goexit()
	}
	panic("sandboxtest: " + msg + " (a suite's guard has no test to fail: use g.For(t) in tests to fail the test instead)")
}

// Errorf reports a failure and goes on: in setup, Main exits 1 once setup
// returns; after it (a suite cleanup that fails), the tests' code 0
// becomes 1.
func (s *Suite) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inSetup {
		s.setupErr = append(s.setupErr, strings.TrimPrefix(msg, "sandboxtest: "))
		return
	}
	s.errs = append(s.errs, msg)
	fmt.Fprintln(stderr(), oneLine(msg))
}

// Logf prints with -test.v.
func (s *Suite) Logf(format string, args ...any) {
	if verbose() {
		fmt.Fprintf(stdout(), format+"\n", args...)
	}
}

func (s *Suite) context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

func (s *Suite) deadline() time.Time { return time.Time{} }

func verbose() bool {
	if testing.Testing() && flag.Parsed() {
		return testing.Verbose()
	}
	for _, a := range os.Args[1:] {
		if a == "-test.v" || a == "-test.v=true" || strings.HasPrefix(a, "-test.v=test2json") {
			return true
		}
	}
	return false
}

// For returns a view of g bound to tb: a failure of its methods fails tb
// (instead of panicking, for a suite's guard), and its Stop, or the end of
// tb, leaves the sandbox running, as it belongs to whoever started it.
// Execs started through the view end with tb.
//
//	func TestQuery(t *testing.T) {
//		addr := db.For(t).Endpoint("5432/tcp")
//		…
//	}
func (g *Guard) For(tb testing.TB) *Guard {
	tb.Helper()
	g.mu.Lock()
	sbx := g.sbx
	g.mu.Unlock()
	v := &Guard{o: tbOwner{tb}, spec: g.spec, name: g.name, s: g.s, sbx: sbx, keepAlive: true}
	tb.Cleanup(v.cleanup)
	return v
}

// SharedSandbox is a sandbox started by the first test that asks for it and
// shared by every later one; see Shared.
type SharedSandbox struct {
	spec Spec

	mu    sync.Mutex
	owner *Suite
	g     *Guard
	err   error
}

type sharedSet struct {
	mu   sync.Mutex
	list []*SharedSandbox
}

var shared sharedSet

// Shared declares a sandbox started lazily: the first test that calls Get
// starts it, every later test gets the same one (safe from parallel tests),
// and Main stops it when the tests are done. Declare it at package level:
//
//	var cache = sandboxtest.Shared(sandboxtest.Spec{Image: "redis:7"})
//
// It may join networks made by the Suite in Main's setup (declare it there
// then), never a test's network, which goes when that test ends. Without
// Main it lives until the test binary exits, and the watchdog removes it
// then.
func Shared(spec Spec) *SharedSandbox {
	s := &SharedSandbox{spec: spec}
	shared.mu.Lock()
	shared.list = append(shared.list, s)
	shared.mu.Unlock()
	return s
}

// Get returns the shared sandbox, starting it on first use; if starting it
// failed, every test that asks fails with the same cause. The guard it
// returns reports to tb (see Guard.For); its Stop leaves the shared sandbox
// running.
func (s *SharedSandbox) Get(tb testing.TB) *Guard {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.g == nil && s.err == nil {
		s.err = sharedNetworks(s.spec)
	}
	if s.g == nil && s.err == nil {
		s.owner = &Suite{}
		var g *Guard
		if msg, ok := s.owner.setup(func(o *Suite) { g = start(o, s.spec) }); ok {
			s.g = g
		} else {
			s.err = errors.New(msg)
		}
	}
	if s.err != nil {
		tb.Fatalf("sandboxtest: shared %s: %v", describe(s.spec), s.err)
		return nil
	}
	return s.g.For(tb)
}

// sharedNetworks refuses a network that goes before the shared sandbox
// would.
func sharedNetworks(spec Spec) error {
	for _, n := range spec.Networks {
		if n == nil {
			return errors.New("Spec.Networks holds a nil *Network")
		}
		if _, ok := n.o.(*Suite); !ok {
			return fmt.Errorf("network %s belongs to a test and goes when it ends; a shared sandbox can only join a network made in Main's setup (Suite.NewNetwork)", n.name)
		}
	}
	return nil
}

// close stops every started shared sandbox, all at once (none depends on
// another), and forgets it, so that a later Get starts afresh.
func (ss *sharedSet) close() bool {
	ss.mu.Lock()
	list := slices.Clone(ss.list)
	ss.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := true
	for _, s := range list {
		wg.Go(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.owner != nil && !s.owner.close() {
				mu.Lock()
				ok = false
				mu.Unlock()
			}
			s.g, s.owner, s.err = nil, nil, nil
		})
	}
	wg.Wait()
	return ok
}
