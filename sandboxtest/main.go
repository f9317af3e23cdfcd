package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/docker"
)

// exit is os.Exit, replaced by tests of Main.
var exit = os.Exit

// stderr is where Main reports, replaced by tests.
var stderr = func() *os.File { return os.Stderr }

// Main runs a package's tests from TestMain with sandboxes that outlive no
// one:
//
//	func TestMain(m *testing.M) { sandboxtest.Main(m) }
//
// It sweeps what dead runs left (on this backend), runs setup — which may
// start sandboxes and networks shared by every test of the package, through
// the Suite — then the tests, then removes everything this run still has
// (suite sandboxes, Shared sandboxes, anything else labelled with the run),
// and exits with the tests' code. When setup fails, Main prints one line
// naming the cause, removes what setup had started, and exits 1.
//
// When the binary does not reach the end of Main (a panic, `go test
// -timeout`, os.Exit elsewhere, SIGKILL), the watchdog removes the
// sandboxes, as for any other.
func Main(m *testing.M, setup ...func(*Suite)) {
	exit(runMain(m, setup))
}

// runner is the part of *testing.M that Main uses.
type runner interface{ Run() int }

func runMain(m runner, setup []func(*Suite)) int {
	ctx := context.Background()
	if _, err := getSession(ctx); err != nil {
		if len(setup) > 0 {
			fmt.Fprintf(stderr(), "sandboxtest: suite setup cannot start: %v\n", err)
			return 1
		}
		// Tests that start sandboxes will report it; others may pass.
		fmt.Fprintf(stderr(), "sandboxtest: no sandboxes in this run: %v\n", err)
	}
	suite := newSuite()
	for _, fn := range setup {
		if msg, ok := suite.setup(fn); !ok {
			fmt.Fprintf(stderr(), "sandboxtest: suite setup failed: %s\n", msg)
			suite.close()
			closeRun(ctx)
			return 1
		}
	}
	suite.ready()
	code := m.Run()
	if !suite.close() && code == 0 {
		code = 1
	}
	if !shared.close() && code == 0 {
		code = 1
	}
	if err := closeRun(ctx); err != nil {
		fmt.Fprintf(stderr(), "sandboxtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
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
		if names := s.run.Sandboxes(); len(names) > 0 {
			for i, err := range s.drv.RemoveSandboxes(ctx, names) {
				if err == nil || errors.Is(err, backend.ErrNotFound) {
					errs = append(errs, s.run.RemoveSandbox(names[i]))
				} else {
					errs = append(errs, err)
				}
			}
		}
		if names := s.run.Networks(); len(names) > 0 {
			for i, err := range s.drv.RemoveNetworks(ctx, names) {
				if err == nil || errors.Is(err, backend.ErrNotFound) {
					errs = append(errs, s.run.RemoveNetwork(names[i]))
				} else {
					errs = append(errs, err)
				}
			}
		}
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

// Suite is what Main's setup starts shared sandboxes through. Its guards
// live until the tests are done; use them from any test.
type Suite struct {
	mu       sync.Mutex
	cleanups []func()
	failures []string
	inSetup  bool
	failMsg  string
}

func newSuite() *Suite { return &Suite{} }

// Start starts a sandbox shared by the package's tests. On failure, setup
// stops there and Main exits 1 with the cause.
func (s *Suite) Start(spec Spec) *Guard { return start(s, spec) }

// NewNetwork creates a network shared by the package's tests.
func (s *Suite) NewNetwork() *Network { return newNetwork(s) }

// setup runs fn in a goroutine of its own, so that a failure can end it
// the way t.FailNow ends a test.
func (s *Suite) setup(fn func(*Suite)) (string, bool) {
	s.mu.Lock()
	s.inSetup, s.failMsg = true, ""
	s.mu.Unlock()
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		fn(s)
	}()
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inSetup = false
	switch {
	case s.failMsg != "":
		return s.failMsg, false
	case panicked != nil:
		return fmt.Sprint("panic: ", panicked), false
	}
	return "", true
}

func (s *Suite) ready() {}

// close runs the suite's cleanups, last in first out; false when one
// reported an error (already printed).
func (s *Suite) close() bool {
	s.mu.Lock()
	cl := slices.Clone(s.cleanups)
	s.cleanups = nil
	before := len(s.failures)
	s.mu.Unlock()
	for i := len(cl) - 1; i >= 0; i-- {
		cl[i]()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.failures) == before
}

// The owner methods: a Suite is the owner of its guards.

func (s *Suite) Helper() {}

// Cleanup registers fn to run when the suite closes.
func (s *Suite) Cleanup(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, fn)
}

// Fatalf ends setup with a failure; called from a test after setup (a
// guard's MappedPort, say), it panics with the message, as there is no test
// of the suite's to fail.
func (s *Suite) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	inSetup := s.inSetup
	if inSetup && s.failMsg == "" {
		s.failMsg = msg
	}
	s.mu.Unlock()
	if inSetup {
		runtime.Goexit()
	}
	panic(msg)
}

// Errorf reports a failure of a suite cleanup.
func (s *Suite) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.failures = append(s.failures, msg)
	s.mu.Unlock()
	fmt.Fprintln(stderr(), msg)
}

// Logf prints with -test.v.
func (s *Suite) Logf(format string, args ...any) {
	if verbose() {
		fmt.Fprintf(stderr(), format+"\n", args...)
	}
}

func (s *Suite) context() context.Context { return context.Background() }
func (s *Suite) deadline() time.Time      { return time.Time{} }

func verbose() bool {
	for _, a := range os.Args[1:] {
		if a == "-test.v" || a == "-test.v=true" || strings.HasPrefix(a, "-test.v=test2json") {
			return true
		}
	}
	return false
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
// Without Main it lives until the test binary exits, and the watchdog
// removes it then.
func Shared(spec Spec) *SharedSandbox {
	s := &SharedSandbox{spec: spec}
	shared.mu.Lock()
	shared.list = append(shared.list, s)
	shared.mu.Unlock()
	return s
}

// Get returns the shared sandbox, starting it on first use; if starting it
// failed, every test that asks fails with the same cause. The guard it
// returns reports to tb; its Stop leaves the shared sandbox running.
func (s *SharedSandbox) Get(tb testing.TB) *Guard {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.g == nil && s.err == nil {
		s.owner = newSuite()
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
	view := &Guard{o: tbOwner{tb}, spec: s.spec, name: s.g.name, s: s.g.s, sbx: s.g.sbx, keepAlive: true}
	tb.Cleanup(view.cleanup)
	return view
}

func (ss *sharedSet) close() bool {
	ss.mu.Lock()
	list := slices.Clone(ss.list)
	ss.mu.Unlock()
	ok := true
	for _, s := range list {
		s.mu.Lock()
		if s.owner != nil {
			ok = s.owner.close() && ok
			s.g, s.owner = nil, nil
		}
		s.mu.Unlock()
	}
	return ok
}
