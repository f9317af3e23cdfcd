package proctest_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/proctest"
)

const envRole = "RZ_PROCTEST_ROLE"

// TestHelperProcess is the helper of the tests below; it does nothing in an
// ordinary run.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv(envRole) {
	case "":
		t.Skip("the helper process of this package's tests")
	case "talk":
		fmt.Println("a line that is not a report")
		proctest.Say("first", "1")
		proctest.Say("multi", "two\nlines")
		proctest.Say("env", os.Getenv("RZ_PROCTEST_SET")+"|"+os.Getenv("RZ_PROCTEST_DROP"))
		fmt.Fprintln(os.Stderr, "to stderr")
		if err := proctest.WaitGo(); err != nil {
			t.Fatal(err)
		}
		proctest.Say("went", "1")
		proctest.Block()
	case "exit3":
		fmt.Fprintln(os.Stderr, "ending with 3")
		os.Exit(3)
	case "block":
		proctest.Say("ready", "1")
		proctest.Block()
	}
}

func spec(role string, env ...string) proctest.Spec {
	return proctest.Spec{
		Name: "helper " + role,
		Argv: proctest.TestArgv("TestHelperProcess", "-test.timeout=1m"),
		Env:  proctest.Environ(func(k string) bool { return strings.HasPrefix(k, "RZ_PROCTEST_") }, append(env, envRole+"="+role)...),
	}
}

func TestReports(t *testing.T) {
	t.Setenv("RZ_PROCTEST_DROP", "dropped")
	h := proctest.StartHelper(t, spec("talk", "RZ_PROCTEST_SET=set"))
	if got := h.Expect("first"); got != "1" {
		t.Errorf("first = %q, want 1", got)
	}
	if got := h.Expect("multi"); got != `two\nlines` {
		t.Errorf("multi = %q: a value with a newline must arrive escaped, on one line", got)
	}
	if got := h.Expect("env"); got != "set|" {
		t.Errorf("env = %q, want set| (RZ_PROCTEST_SET set, RZ_PROCTEST_DROP dropped)", got)
	}
	h.Expect("waiting")
	if _, ok := h.Value("went"); ok {
		t.Errorf("the helper went on before it was told to go")
	}
	h.Tell("go")
	h.Expect("went")
	if got, want := h.Keys(""), []string{"first", "multi", "env", "waiting", "went"}; !slices.Equal(got, want) {
		t.Errorf("Keys = %q, want %q", got, want)
	}
	h.Finish()
	if got := h.Lines(); !slices.Contains(got, "a line that is not a report") {
		t.Errorf("Lines = %q, want the line that is not a report among them", got)
	}
	if out := h.Output(); !strings.Contains(out, "a line that is not a report\n") || !strings.Contains(out, "to stderr\n") {
		t.Errorf("Output = %q, want stdout's other lines and stderr", out)
	}
	if got := h.Status(); got != "exit 0" {
		t.Errorf("Status = %q, want exit 0", got)
	}
}

func TestEndedWithoutSaying(t *testing.T) {
	p, err := proctest.Start(spec("exit3"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Get("never", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "ended (exit 3) without saying never") || !strings.Contains(err.Error(), "ending with 3") {
		t.Errorf("Get of a key never said: %v; want that it ended, how, and its stderr", err)
	}
	if !p.Wait(time.Minute) {
		t.Fatal("an exited helper did not end")
	}
	if exited, err := p.Exited(); !exited || err == nil {
		t.Errorf("Exited = %v, %v; want true and the exit error", exited, err)
	}
}

func TestGetTimesOut(t *testing.T) {
	h := proctest.StartHelper(t, spec("block"))
	h.Expect("ready")
	if _, err := h.Get("never", 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not say never within 50ms") {
		t.Errorf("Get past its time: %v", err)
	}
	if h.Status() != "running" {
		t.Errorf("Status = %q while it runs", h.Status())
	}
}

func TestKill(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no signals to tell apart on Windows")
	}
	h := proctest.StartHelper(t, spec("block"))
	h.Expect("ready")
	before := time.Now()
	h.KillAndWait()
	if k := h.KilledAt(); k.Before(before) {
		t.Errorf("KilledAt = %v, before Kill was called (%v)", k, before)
	}
	if sig, ok := h.Signaled(); !ok || sig.String() != "killed" {
		t.Errorf("Signaled = %v, %v; want killed", sig, ok)
	}
	if got := h.Status(); got != "signal: killed" {
		t.Errorf("Status = %q, want signal: killed", got)
	}
}

// recordingTB records what a Helper reports instead of failing the test.
type recordingTB struct {
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recordingTB) Helper()               {}
func (r *recordingTB) Cleanup(fn func())     { r.cleanups = append(r.cleanups, fn) }
func (r *recordingTB) Fatalf(string, ...any) { panic("Fatalf") }
func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestCleanupKills(t *testing.T) {
	rec := &recordingTB{}
	h := proctest.StartHelper(rec, spec("block"))
	h.Expect("ready")
	if len(rec.cleanups) != 1 {
		t.Fatalf("StartHelper registered %d cleanups, want 1", len(rec.cleanups))
	}
	rec.cleanups[0]()
	if len(rec.errors) > 0 {
		t.Errorf("the cleanup reported %q", rec.errors)
	}
	if exited, _ := h.Exited(); !exited {
		t.Errorf("the helper still runs after its test's cleanup")
	}
}

func TestBuffer(t *testing.T) {
	var b proctest.Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprint(&b, "x")
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := len(b.String()); n != 400 {
		t.Errorf("%d bytes after 400 writes of one", n)
	}
}

func TestPoll(t *testing.T) {
	n := 0
	if !proctest.Poll(time.Minute, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("Poll stopped after %d calls, want true after 3", n)
	}
	start := time.Now()
	if proctest.Poll(30*time.Millisecond, func() bool { return false }) {
		t.Error("Poll of a condition that never holds reported true")
	}
	if since := time.Since(start); since < 30*time.Millisecond {
		t.Errorf("Poll gave up after %s, before its 30ms", since)
	}
}
