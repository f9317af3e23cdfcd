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
	"sync/atomic"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/origin"
)

// exit is os.Exit, replaced by tests of Main.
var exit = os.Exit

// mainPhase is where Main is, for what GuardAll's creates are said to be
// made by: no test runs in its Setup, or before and after its tests.
var mainPhase atomic.Int32

// The phases of Main.
const (
	phaseNone  = iota // Main does not run (no TestMain of sandboxtest's)
	phaseMain         // Main, before its Setup or after the tests
	phaseSetup        // a Setup
	phaseTests        // m.Run
)

// stderr is where Main and a Suite report failures, and stdout where a Suite
// logs; replaced by tests. They are functions so that a change of
// os.Stderr (testing makes it os.Stdout under -test.v=test2json) is seen.
var (
	stderr = func() io.Writer { return os.Stderr }
	stdout = func() io.Writer { return os.Stdout }
)

// TestingM is what Main runs: *testing.M, or the body of a program that is
// not a test binary (a demo, a tool started with `go run` that needs a
// database while it runs), whose Run returns its exit code.
type TestingM interface{ Run() int }

// Option changes what Main does. Only this package makes them.
type Option interface{ applyMain(*mainConfig) }

type mainConfig struct {
	setup     []func(*Suite)
	guardAll  bool
	leakCheck bool
}

type mainOption func(*mainConfig)

func (f mainOption) applyMain(c *mainConfig) { f(c) }

// Setup makes Main run fn before the tests, with a Suite to start sandboxes
// and networks that every test of the package shares:
//
//	var db *sandboxtest.Guard
//
//	func TestMain(m *testing.M) {
//		sandboxtest.Main(m, sandboxtest.Setup(func(s *sandboxtest.Suite) {
//			db = s.Start(sandboxtest.Spec{Image: "postgres:16", …})
//		}))
//	}
//
// Several Setup options run in order.
func Setup(fn func(*Suite)) Option {
	return mainOption(func(c *mainConfig) { c.setup = append(c.setup, fn) })
}

// Main runs a package's tests from TestMain with sandboxes that outlive no
// one, and exits with their code:
//
//	func TestMain(m *testing.M) { sandboxtest.Main(m) }
//
// It parses the test flags (so setup may call testing.Short), sweeps what
// dead runs left on this backend, runs each Setup, runs the tests, then
// stops what is still up — the suite's sandboxes and networks last in first
// out, then anything else of this run — and exits with the tests' code, or
// 1 when stopping something failed.
//
// When setup fails (Suite.Fatalf, a Suite.Start or NewNetwork that cannot
// start, a panic), Main prints one line naming the cause, removes what
// setup had started, and exits 1 without running a test. Setup is bounded
// by -test.timeout, like the tests; with -test.list it is not run at all.
//
// When the binary does not reach the end of Main (a test panics, `go test
// -timeout` fires, os.Exit is called elsewhere, SIGKILL), the watchdog
// removes the run's sandboxes and networks within about a second, as for
// any other.
//
// A program that is not a test binary passes its body as m: Main gives it
// the same sweep, setup and final clean-up, and exits with its code.
func Main(m TestingM, opts ...Option) {
	stopIfWatchdog()
	var cfg mainConfig
	for _, o := range opts {
		o.applyMain(&cfg)
	}
	code := runMainWith(m, cfg)
	// A failed package's output is shown by `go test`: the fates it
	// printed were seen.
	markShown(code != 0)
	endRun(code)
	exit(code)
}

// endRun says, last thing, that the run ends normally: what it leaves for
// its watchdog (a process that left its command's session) is then told
// as left by a run that ended, not as by one that died.
func endRun(code int) {
	if s := openedSession(); s != nil {
		s.Ended(code)
	}
}

func runMain(m TestingM, setup []func(*Suite)) int {
	return runMainWith(m, mainConfig{setup: setup})
}

func runMainWith(m TestingM, cfg mainConfig) int {
	if testing.Testing() && !flag.Parsed() {
		flag.Parse()
	}
	if testFlag("test.list") != "" {
		// Listing runs no test: nothing to sweep, nothing to share.
		return m.Run()
	}
	ctx := context.Background()
	setup := cfg.setup
	mainPhase.Store(phaseMain)
	defer mainPhase.Store(phaseNone)
	if cfg.guardAll {
		_, stop, err := startGuardAll(ctx)
		if err != nil {
			fmt.Fprintf(stderr(), "sandboxtest: %s\n", oneLine(err.Error()))
			return 1
		}
		// After the run's close (deferred before it), so that the close
		// still finds the engine where the session does.
		defer stop()
	}
	if _, err := getSession(ctx); err != nil {
		if cfg.guardAll {
			// testcontainers-go chooses its engine once per process: when
			// its look at the guard failed, it took another engine for
			// good, and every container it made would pass the guard.
			fmt.Fprintf(stderr(), "sandboxtest: GuardAll: no test runs, as nothing could be guarded: %s\n", oneLine(err.Error()))
			return 1
		}
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
	mainPhase.Store(phaseSetup)
	defer mainPhase.Store(phaseMain)
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

	mainPhase.Store(phaseTests)
	code := m.Run()
	mainPhase.Store(phaseMain)

	ok := suite.close()
	if cfg.leakCheck && !reportLeaks(ctx) && code == 0 {
		code = 1
	}
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
	s := openedSession()
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	return s.Close(ctx)
}

// Suite is what Main's setup starts shared sandboxes and networks through.
// They live until the tests are done, and Main stops them, last in first
// out, before the binary exits.
//
// In setup, a Suite behaves like a test: Fatalf ends setup (from setup's
// goroutine, as t.Fatalf ends a test), Cleanup registers what to run when
// Main closes the suite, Logf prints with -test.v.
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
	setupErr []string // errors and fatals in setup
	errs     []string // errors after setup
}

// Start returns a sandbox shared by the package's tests, which starts at
// its first use: the first test's For(t), or a method of the guard (in
// setup too, for an Endpoint to build a URL from). When no test that runs
// needs it (`go test -run '^$' -bench .`), it is never started. When it
// cannot start, every test that needs it fails with the cause; in setup,
// setup ends there and Main exits 1 with the cause. A spec that is wrong
// in itself ends setup at once.
func (s *Suite) Start(spec Spec) *Guard {
	og := s.origin()
	if err := spec.check(); err != nil {
		s.fatalf("sandboxtest: start %s: %v", describe(spec, og), err)
	}
	g := &Guard{o: s, spec: spec, origin: og}
	g.lazy = &lazy{start: func() error {
		// Its networks and volumes first, so that their removal,
		// registered before the sandbox's stop, runs after it.
		if err := spec.makeObjects(); err != nil {
			return fmt.Errorf("start %s: %w", describe(spec, og), err)
		}
		s.addCleanup(g.cleanup)
		note, err := g.start(s.context())
		if note != "" {
			s.Logf("%s", note)
		}
		if err != nil {
			return fmt.Errorf("start %s: %w", describe(spec, og), err)
		}
		return nil
	}}
	return g
}

// origin is what a suite's sandbox or network is said to be started by,
// wherever its first use starts it: the Setup (or the suite, asked after
// it), at the place Start or NewNetwork was called.
func (s *Suite) origin() origin.Origin {
	s.mu.Lock()
	inSetup := s.inSetup
	s.mu.Unlock()
	if inSetup {
		return origin.Setup(mainName(), origin.Caller())
	}
	return origin.Suite(mainName(), origin.Caller())
}

// mainName is what Main runs in, as origins say it: TestMain in a test
// binary, else the program's own Main.
func mainName() string {
	if testing.Testing() {
		return "TestMain"
	}
	return "Main"
}

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

// failed reports whether a failure was reported after setup.
func (s *Suite) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.errs) > 0
}

// Cleanup registers fn to run when Main closes the suite, after the tests,
// last in first out with the suite's sandboxes and networks.
func (s *Suite) Cleanup(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, fn)
}

// Fatalf ends setup with a failure: Main prints the message and exits 1.
func (s *Suite) Fatalf(format string, args ...any) { s.fatalf(format, args...) }

// Logf prints with -test.v.
func (s *Suite) Logf(format string, args ...any) {
	if verbose() {
		fmt.Fprintf(stdout(), format+"\n", args...)
	}
}

// The Suite as an owner of guards and networks.

func (s *Suite) testTB() testing.TB { return nil }

func (s *Suite) addCleanup(fn func()) { s.Cleanup(fn) }

func (s *Suite) logf(format string, args ...any) { s.Logf(format, args...) }

// fatalf ends setup with a failure. Called after setup (from a test,
// through one of the suite's guards), it panics with the message, as there
// is no test of the suite's to fail.
func (s *Suite) fatalf(format string, args ...any) {
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

// errorf reports a failure and goes on: in setup, Main exits 1 once setup
// returns; after it (a suite cleanup that fails), the tests' code 0
// becomes 1.
func (s *Suite) errorf(format string, args ...any) {
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
