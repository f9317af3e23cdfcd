package sandboxtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// These tests call runMain with a fake runner in place of *testing.M, so
// that Main's whole path runs in this process with a real engine. The
// session (backend, run, watchdog) is this test binary's: runMain's close
// removes everything labelled with its run, which is why none of these
// tests is parallel with another.

// runFunc is a runner: Run calls the function.
type runFunc func() int

func (f runFunc) Run() int { return f() }

// captureStderr replaces where Main reports (and where a Suite logs) for
// the test.
func captureStderr(t *testing.T) *proctest.Buffer {
	t.Helper()
	oldErr, oldOut := stderr, stdout
	errBuf, outBuf := &proctest.Buffer{}, &proctest.Buffer{}
	stderr = func() io.Writer { return errBuf }
	stdout = func() io.Writer { return outBuf }
	t.Cleanup(func() {
		stderr, stdout = oldErr, oldOut
		if s := outBuf.String(); s != "" {
			t.Logf("suite log:\n%s", s)
		}
	})
	return errBuf
}

func lines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// engineSession is this binary's session, on the Docker backend.
func engineSession(t *testing.T) (*reaper.Session, *docker.Driver) {
	t.Helper()
	testimage.Engine(t)
	s, err := getSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d, ok := s.Driver().(*docker.Driver)
	if !ok {
		t.Skipf("these tests need the docker backend; this process uses %s", s.Driver().Name())
	}
	if s.Ledger() == nil {
		t.Skip("RIGHTSIZE_REAPER=off: there is no ledger to check")
	}
	return s, d
}

// runResources lists the ids of what carries run id's label.
func runResources(t *testing.T, d *docker.Driver, runID string) (ctrs, nets []string) {
	t.Helper()
	ctrs, err := d.ListRun(context.Background(), sandboxKind, runID)
	if err != nil {
		t.Fatal(err)
	}
	nets, err = d.ListRun(context.Background(), networkKind, runID)
	if err != nil {
		t.Fatal(err)
	}
	return ctrs, nets
}

// assertRunEmpty checks that nothing of this binary's run is left: no
// container or network with its label (either spelling), no line in its
// ledger, no file of it in the runs folder.
func assertRunEmpty(t *testing.T, s *reaper.Session, d *docker.Driver) {
	t.Helper()
	if ctrs, nets := runResources(t, d, s.RunID()); len(ctrs)+len(nets) > 0 {
		t.Errorf("left on the engine: containers %q, networks %q", ctrs, nets)
	}
	if l := s.Ledger().Names(ledger.SandboxKind); len(l) > 0 {
		t.Errorf("ledger still lists sandboxes %q", l)
	}
	if l := s.Ledger().Names(ledger.NetworkKind); len(l) > 0 {
		t.Errorf("ledger still lists networks %q", l)
	}
	rec, sbx, nts := ledger.Paths(s.Ledger().RunsDir(), s.RunID())
	for _, p := range []string{rec, ledger.OwnRecordPath(s.Ledger().RunsDir(), s.RunID()), sbx, nts} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ledger file %s is still there (%v)", p, err)
		}
	}
}

// exists reports whether a container of that name exists.
func exists(t testing.TB, d *docker.Driver, name string) bool {
	t.Helper()
	_, err := d.Client().ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	if err == nil {
		return true
	}
	if !strings.Contains(strings.ToLower(err.Error()), "no such container") {
		t.Fatalf("inspect %s: %v", name, err)
	}
	return false
}

func assertGone(t *testing.T, d *docker.Driver, names ...string) {
	t.Helper()
	for _, n := range names {
		if n == "" {
			t.Errorf("a sandbox was not started, so its removal proves nothing")
			continue
		}
		if exists(t, d, n) {
			t.Errorf("%s exists; want it gone", n)
		}
	}
}

// serverSpec runs the test image's HTTP server on 8080.
func serverSpec(t *testing.T) Spec {
	return Spec{
		Image:      testimage.Busybox(t),
		Cmd:        []string{testimage.ServerPath, "8080"},
		Ports:      []string{testimage.ServerPort},
		WaitingFor: wait.ForLog("ready"),
	}
}

func httpGet(t testing.TB, addr string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("GET %s: %v", addr, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "rightsize-test-server") {
		t.Fatalf("GET %s: %s %q", addr, resp.Status, body)
	}
}

// failTB records Fatalf instead of failing the test, and ends the
// goroutine as Fatalf would: call what uses it through runFailTB.
type failTB struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (f *failTB) Helper() {}

func (f *failTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *failTB) message() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatal
}

// runFailTB runs fn with a failTB on a goroutine of its own and returns
// what it was failed with ("" if it was not).
func runFailTB(t *testing.T, fn func(tb testing.TB)) string {
	ft := &failTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ft)
	}()
	<-done
	return ft.message()
}

func TestMainSetupFailure(t *testing.T) {
	s, d := engineSession(t)
	const missing = "rightsize-test/no-such-image:missing"
	tests := []struct {
		name string
		// fail is called by setup after it started a sandbox on a network.
		fail   func(t *testing.T, su *Suite)
		want   []string
		reason string
	}{{
		name: "missing image",
		fail: func(t *testing.T, su *Suite) {
			su.Start(Spec{Image: missing}).Host() // used in setup: started there
			t.Error("setup went on after a Start that failed")
		},
		want:   []string{"start " + missing},
		reason: "a suite's sandbox that fails to start where setup uses it ends setup, and the line names the image",
	}, {
		name: "panic",
		fail: func(t *testing.T, su *Suite) {
			panic("migrations: relation users exists")
		},
		want:   []string{"panic at main_internal_test.go:", "migrations: relation users exists"},
		reason: "a panic in setup is reported where it happened, not as a crash",
	}, {
		name: "Fatalf",
		fail: func(t *testing.T, su *Suite) {
			su.Fatalf("migrations failed:\nrelation %q exists", "users")
			t.Error("setup went on after Fatalf")
		},
		want:   []string{`migrations failed: relation "users" exists`},
		reason: "Fatalf ends setup; a message of several lines is printed as one",
	}, {
		name: "a cleanup's error",
		fail: func(t *testing.T, su *Suite) {
			su.errorf("seed data: %v", "bad row")
			su.Start(serverSpec(t))
		},
		want:   []string{"seed data: bad row"},
		reason: "an error reported in setup (as a guard's failed stop would) lets it go on and fails it when it returns",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := captureStderr(t)
			var started []string
			ran := false
			code := runMain(runFunc(func() int { ran = true; return 0 }), []func(*Suite){func(su *Suite) {
				n := su.NewNetwork()
				spec := serverSpec(t)
				spec.Networks = []*Network{n}
				started = append(started, su.Start(spec).Name())
				tc.fail(t, su)
			}})
			if code != 1 {
				t.Errorf("runMain = %d, want 1 (%s)", code, tc.reason)
			}
			if ran {
				t.Errorf("the tests ran after setup failed")
			}
			got := lines(out.String())
			if len(got) != 1 {
				t.Fatalf("stderr has %d lines, want 1:\n%s", len(got), out)
			}
			if !strings.HasPrefix(got[0], "sandboxtest: suite setup failed: ") {
				t.Errorf("stderr %q does not start with the prefix", got[0])
			}
			t.Logf("stderr: %s", got[0])
			for _, w := range tc.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("stderr %q does not contain %q (%s)", got[0], w, tc.reason)
				}
			}
			assertGone(t, d, started...)
			assertRunEmpty(t, s, d)
		})
	}
}

func TestMainRunsTestsThenStopsEverything(t *testing.T) {
	s, d := engineSession(t)
	out := captureStderr(t)
	var (
		web     *Guard
		netName string
		closed  []string
		webName string
	)
	setup := func(su *Suite) {
		su.Cleanup(func() { closed = append(closed, "first cleanup") })
		n := su.NewNetwork()
		netName = n.Name()
		spec := serverSpec(t)
		spec.Networks = []*Network{n}
		web = su.Start(spec)
		webName = web.Name()
		su.Cleanup(func() { closed = append(closed, "last cleanup") })
	}
	tests := func() int {
		t.Run("parallel", func(t *testing.T) {
			for i := range 6 {
				t.Run(fmt.Sprint(i), func(t *testing.T) {
					t.Parallel()
					httpGet(t, web.For(t).Endpoint(testimage.ServerPort))
				})
			}
		})
		ctrs, nets := runResources(t, d, s.RunID())
		if len(ctrs) != 1 || len(nets) != 1 {
			t.Errorf("after the tests: containers %q, networks %q; want the suite's sandbox and network", ctrs, nets)
		}
		return 3
	}
	start := time.Now()
	code := runMain(runFunc(tests), []func(*Suite){setup})
	t.Logf("runMain: %v", time.Since(start))
	if code != 3 {
		t.Errorf("runMain = %d, want the tests' code 3", code)
	}
	if want := []string{"last cleanup", "first cleanup"}; !slicesEqual(closed, want) {
		t.Errorf("suite cleanups ran as %q, want %q (last in, first out)", closed, want)
	}
	if s := out.String(); s != "" {
		t.Errorf("stderr: %s", s)
	}
	// No polling: Main has returned, so everything must be gone already.
	assertGone(t, d, webName)
	if _, nets := runResources(t, d, s.RunID()); len(nets) > 0 {
		t.Errorf("network %s is still there", netName)
	}
	assertRunEmpty(t, s, d)
}

// A suite's volume is made at the first use of a sandbox that mounts it,
// in the run's ledger and labelled with the run, shared by the package's
// tests, and gone with its ledger line when Main returns.
func TestMainSuiteVolume(t *testing.T) {
	s, d := engineSession(t)
	var vol *Volume
	var web *Guard
	setup := func(su *Suite) {
		vol = su.NewVolume()
		spec := serverSpec(t)
		spec.Mounts = []Mount{{Volume: vol, Path: "/data"}}
		web = su.Start(spec)
	}
	var name string
	tests := func() int {
		t.Run("uses", func(t *testing.T) {
			g := web.For(t)
			if res, err := g.Exec(t.Context(), []string{"sh", "-c", "echo shared > /data/f && cat /data/f"}); err != nil || res.ExitCode != 0 || res.Stdout != "shared\n" {
				t.Errorf("the suite's sandbox writes to its volume: %v, %v", res, err)
			}
		})
		name = vol.Name()
		vols, err := d.ListRun(context.Background(), names.VolumeKind, s.RunID())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, names.VolumePrefix) || !slices.Contains(vols, name) {
			t.Errorf("during the tests: volume %q; the engine has %q labelled with run %s", name, vols, s.RunID())
		}
		if l := s.Ledger().Names(ledger.VolumeKind); !slices.Contains(l, name) {
			t.Errorf("during the tests: the ledger lists volumes %q, not %s", l, name)
		}
		return 0
	}
	if code := runMain(runFunc(tests), []func(*Suite){setup}); code != 0 {
		t.Errorf("runMain = %d, want 0", code)
	}
	// No polling: Main has returned, so everything must be gone already.
	if vols, err := d.ListRun(context.Background(), names.VolumeKind, s.RunID()); err != nil || len(vols) > 0 {
		t.Errorf("after Main: volumes %q of the run (%v)", vols, err)
	}
	if l := s.Ledger().Names(ledger.VolumeKind); len(l) > 0 {
		t.Errorf("after Main: the ledger still lists volumes %q", l)
	}
	assertRunEmpty(t, s, d)
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

func TestMainCleanupFailureFailsTheRun(t *testing.T) {
	testimage.Engine(t) // Main opens the session first
	tests := []struct {
		name   string
		tests  int
		fail   bool
		want   int
		reason string
	}{
		{"passing tests, cleanup fails", 0, true, 1, "a cleanup failure must fail a run that passed"},
		{"failing tests, cleanup fails", 5, true, 5, "the tests' own code says more than 1"},
		{"passing tests, cleanup passes", 0, false, 0, "nothing failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := captureStderr(t)
			code := runMain(runFunc(func() int { return tc.tests }), []func(*Suite){func(su *Suite) {
				su.Cleanup(func() {
					if tc.fail {
						su.errorf("sandboxtest: closing the pool: %v", "connection reset")
					}
				})
			}})
			if code != tc.want {
				t.Errorf("runMain = %d, want %d (%s)", code, tc.want, tc.reason)
			}
			if got := out.String(); tc.fail != strings.Contains(got, "closing the pool: connection reset") {
				t.Errorf("stderr %q; want the cleanup's message: %v", got, tc.fail)
			}
		})
	}
}

func TestMainWithoutSetup(t *testing.T) {
	s, d := engineSession(t)
	out := captureStderr(t)
	var leaked string
	code := runMain(runFunc(func() int {
		// A guard whose cleanup never runs, as when a test's goroutine
		// outlives it: Main's close of the run must remove it anyway.
		leaked = Start(leakTB{t}, serverSpec(t)).Name()
		return 0
	}), nil)
	if code != 0 {
		t.Errorf("runMain = %d, want 0", code)
	}
	if s := out.String(); s != "" {
		t.Errorf("stderr: %s", s)
	}
	assertGone(t, d, leaked)
	assertRunEmpty(t, s, d)
}

// leakTB drops cleanups.
type leakTB struct{ testing.TB }

func (leakTB) Cleanup(func()) {}

func TestMainListSkipsSetup(t *testing.T) {
	if err := flag.Set("test.list", "^$"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set("test.list", "") })
	code := runMain(runFunc(func() int { return 0 }), []func(*Suite){func(*Suite) {
		t.Error("setup ran for -test.list")
	}})
	if code != 0 {
		t.Errorf("runMain = %d, want 0", code)
	}
}

func TestSuiteGuardFromATest(t *testing.T) {
	_, d := engineSession(t)
	captureStderr(t)
	var web *Guard
	code := runMain(runFunc(func() int {
		// The suite's guard has no test to fail: it panics, with the cause
		// and what to do instead.
		func() {
			defer func() {
				msg := fmt.Sprint(recover())
				for _, w := range []string{"MappedPort(\"9/tcp\")", web.Name(), "publishes no port", "For(t)"} {
					if !strings.Contains(msg, w) {
						t.Errorf("panic %q does not contain %q", msg, w)
					}
				}
			}()
			web.MappedPort("9/tcp")
			t.Error("MappedPort of an unpublished port returned")
		}()
		// Through For, the same failure fails the test and nothing panics.
		msg := runFailTB(t, func(tb testing.TB) { web.For(tb).MappedPort("9/tcp") })
		if !strings.Contains(msg, "publishes no port") {
			t.Errorf("For(t).MappedPort failed the test with %q", msg)
		}
		// Stopping the view leaves the suite's sandbox running.
		if err := web.For(t).Stop(context.Background()); err != nil {
			t.Error(err)
		}
		if !exists(t, d, web.Name()) {
			t.Errorf("after the view's Stop the suite's sandbox is gone")
		}
		return 0
	}), []func(*Suite){func(su *Suite) { web = su.Start(serverSpec(t)) }})
	if code != 0 {
		t.Errorf("runMain = %d", code)
	}
	assertGone(t, d, web.Name())
}

func TestMainSetupBoundedByTimeout(t *testing.T) {
	s, d := engineSession(t)
	out := captureStderr(t)
	old := flag.Lookup("test.timeout").Value.String()
	// The binary's own alarm is already set: changing the flag only
	// changes what runMain reads.
	if err := flag.Set("test.timeout", "1ms"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set("test.timeout", old) })
	code := runMain(runFunc(func() int { return 0 }), []func(*Suite){func(su *Suite) {
		<-su.context().Done()
		su.Start(serverSpec(t)).Host() // used in setup: started there
	}})
	if code != 1 {
		t.Errorf("runMain = %d, want 1: setup ran past -test.timeout", code)
	}
	got := out.String()
	t.Logf("stderr: %s", got)
	if !strings.Contains(got, "(setup ran past -test.timeout=1ms)") || len(lines(got)) != 1 {
		t.Errorf("stderr %q; want one line saying the deadline passed", got)
	}
	assertRunEmpty(t, s, d)
}
