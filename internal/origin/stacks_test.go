package origin

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests of Creator wait, in the test's own code, on a client call to a
// server that answers only once Creator has looked, as a test waits on a
// create that GuardAll's proxy holds while it decides. None is parallel
// with another test of the package: Creator would see it.

// hold is a server whose handler holds each request until release, and
// says when n requests are held.
type hold struct {
	srv     *httptest.Server
	mu      sync.Mutex
	n       int
	arrived chan struct{}
	release chan struct{}
}

func newHold(t *testing.T, n int) *hold {
	h := &hold{n: n, arrived: make(chan struct{}), release: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		if h.n--; h.n == 0 {
			close(h.arrived)
		}
		h.mu.Unlock()
		<-h.release
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// look runs Creator once the requests are held, then lets them go.
func (h *hold) look(t *testing.T) <-chan Origin {
	out := make(chan Origin, 1)
	go func() {
		select {
		case <-h.arrived:
			out <- Creator()
		case <-time.After(30 * time.Second):
			out <- Origin{Test: "(the requests never arrived)"}
		}
		close(h.release)
	}()
	return out
}

// next is file:line of the line after its caller's.
func next() string {
	_, file, n, _ := runtime.Caller(1)
	return filepath.Base(file) + ":" + strconv.Itoa(n+1)
}

// done ends a request the test made.
func done(t *testing.T, res *http.Response, err error) {
	if err != nil {
		t.Error(err)
		return
	}
	res.Body.Close()
}

func TestCreatorOneTest(t *testing.T) {
	h := newHold(t, 1)
	got := h.look(t)
	want := next()
	res, err := http.Get(h.srv.URL)
	done(t, res, err)
	if o := <-got; o.Test != "TestCreatorOneTest" || o.Place != want {
		t.Errorf("Creator() = %+v, want TestCreatorOneTest at %s", o, want)
	}
}

func TestCreatorGoroutineOfTest(t *testing.T) {
	h := newHold(t, 1)
	got := h.look(t)
	var wg sync.WaitGroup
	var want string
	wg.Go(func() {
		want = next()
		res, err := http.Get(h.srv.URL)
		done(t, res, err)
	})
	wg.Wait()
	if o := <-got; o.Test != "TestCreatorGoroutineOfTest" || o.Place != want {
		t.Errorf("Creator() = %+v, want TestCreatorGoroutineOfTest at %s: a goroutine the test started is the test's", o, want)
	}
}

func TestCreatorSubtest(t *testing.T) {
	t.Run("eu", func(t *testing.T) {
		h := newHold(t, 1)
		got := h.look(t)
		want := next()
		res, err := http.Get(h.srv.URL)
		done(t, res, err)
		if o := <-got; o.Test != "a subtest of TestCreatorSubtest" || o.Place != want {
			t.Errorf("Creator() = %+v, want a subtest of TestCreatorSubtest at %s: a subtest's name is on no stack", o, want)
		}
	})
}

func TestCreatorParallel(t *testing.T) {
	h := newHold(t, 2)
	got := h.look(t)
	t.Run("a", func(t *testing.T) {
		t.Parallel()
		res, err := http.Get(h.srv.URL)
		done(t, res, err)
	})
	t.Run("b", func(t *testing.T) {
		t.Parallel()
		res, err := http.Get(h.srv.URL)
		done(t, res, err)
	})
	t.Cleanup(func() {
		o := <-got
		if o.Test != "a subtest of TestCreatorParallel" || o.Place != "" {
			t.Errorf("Creator() = %+v, want a subtest of TestCreatorParallel and no place: two of its subtests wait, at two places", o)
		}
	})
}

func TestCreatorTwoTests(t *testing.T) {
	h := newHold(t, 2)
	got := h.look(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		res, err := http.Get(h.srv.URL)
		done(t, res, err)
	})
	t.Run("eu", func(t *testing.T) {
		res, err := http.Get(h.srv.URL)
		done(t, res, err)
	})
	wg.Wait()
	o := <-got
	if o.Test != "TestCreatorTwoTests or a subtest of TestCreatorTwoTests (parallel: could not tell which)" || o.Place != "" {
		t.Errorf("Creator() = %+v, want both named, and that which one cannot be told", o)
	}
}

func TestCreatorChildProcess(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	cmd := exec.Command(sh, "-c", "read x")
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan Origin, 1)
	go func() {
		// Until the test waits for its child.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if strings.Contains(string(allStacks()), "os/exec.(*Cmd).Wait") {
				break
			}
		}
		got <- Creator()
		w.Close()
	}()
	want := next()
	cmd.Wait()
	if o := <-got; o.Test != "TestCreatorChildProcess" || o.Place != want {
		t.Errorf("Creator() = %+v, want TestCreatorChildProcess at %s: `docker run` is a child the test waits on", o, want)
	}
}

// TestCreatorOutlived: a goroutine a subtest started waits after the
// subtest ended: no test is named, and the words say so.
func TestCreatorOutlived(t *testing.T) {
	h := newHold(t, 1)
	start := make(chan struct{})
	done := make(chan struct{})
	runners := func() int { return bytes.Count(allStacks(), []byte("\ntesting.tRunner(")) }
	before := runners()
	t.Run("inner", func(t *testing.T) {
		go func() {
			defer close(done)
			<-start
			res, err := http.Get(h.srv.URL)
			if err == nil {
				res.Body.Close()
			}
		}()
	})
	// The subtest's goroutine ends a moment after t.Run returns; until
	// then the stacks still show it, and Creator rightly names it (seen
	// once on a loaded machine).
	for deadline := time.Now().Add(30 * time.Second); runners() > before && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
	}
	if n := runners(); n > before {
		t.Fatalf("the subtest's goroutine is still there 30 s after t.Run returned (%d test goroutines, %d before)", n, before)
	}
	got := h.look(t)
	close(start)
	o := <-got
	<-done
	if !strings.HasPrefix(o.Test, "no test (a goroutine that outlived its test, started in TestCreatorOutlived)") || o.Place == "" {
		t.Errorf("Creator() = %+v, want no test, from a goroutine that outlived its test, with its place", o)
	}
}

func TestCreatorNothingWaits(t *testing.T) {
	if o := Creator(); o.Test != "TestCreatorNothingWaits" || o.Place != "" {
		t.Errorf("Creator() = %+v, want the one test running, with no place", o)
	}
}

func TestParseStacks(t *testing.T) {
	dump := "goroutine 7 [select, 2 minutes]:\n" +
		"net/http.(*persistConn).roundTrip(0xc000, 0xc001)\n\t/go/src/net/http/transport.go:2911 +0x83d\n" +
		"example.com/store_test.(*S).TestX.func1({0x5a?, 0x2})\n\t/src/store_test.go:42 +0x25\n" +
		"...additional frames elided...\n" +
		"created by example.com/store_test.TestY in goroutine 3\n\t/src/store_test.go:50 +0x65\n" +
		"\n" +
		"goroutine x [broken]:\nnot.a.goroutine()\n\t/a.go:1\n\n" +
		"goroutine 1 [running]:\nmain.main()\n\t_testmain.go:48\n"
	gs := parseStacks([]byte(dump))
	if len(gs) != 2 {
		t.Fatalf("parsed %d goroutines, want 2 (the broken header skipped): %+v", len(gs), gs)
	}
	g := gs[0]
	if g.id != 7 || len(g.frames) != 2 || g.parent != 3 || g.creator.place() != "store_test.go:50" {
		t.Errorf("goroutine 7 = %+v", g)
	}
	if f := g.frames[1]; f.fn != "example.com/store_test.(*S).TestX.func1" || f.place() != "store_test.go:42" {
		t.Errorf("frame = %+v", f)
	}
	if pkgOf(g.frames[1].fn) != "example.com/store_test" || outerName(g.frames[1].fn) != "(*S)" {
		t.Errorf("pkgOf, outerName of %s = %q, %q", g.frames[1].fn, pkgOf(g.frames[1].fn), outerName(g.frames[1].fn))
	}
	if gs[1].id != 1 || gs[1].frames[0].place() != "_testmain.go:48" {
		t.Errorf("goroutine 1 = %+v", gs[1])
	}
}

// Two top-level parallel tests, which run once every other test of the
// package is done: one waits on a client call of its own while the other
// looks, as the other's create would have it looked at. A hands B the
// channels of this round (-count runs them again).
type topRound struct{ held, free chan struct{} }

var topRounds = make(chan topRound)

func TestCreatorTopLevelParallelA(t *testing.T) {
	t.Parallel()
	r := topRound{held: make(chan struct{}), free: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		close(r.held)
		<-r.free
	}))
	defer srv.Close()
	select {
	case topRounds <- r:
	case <-time.After(30 * time.Second):
		t.Fatal("TestCreatorTopLevelParallelB never came")
	}
	res, err := http.Get(srv.URL)
	done(t, res, err)
}

func TestCreatorTopLevelParallelB(t *testing.T) {
	t.Parallel()
	var r topRound
	select {
	case r = <-topRounds:
	case <-time.After(30 * time.Second):
		t.Fatal("TestCreatorTopLevelParallelA never came")
	}
	defer close(r.free)
	<-r.held
	h := newHold(t, 1)
	got := h.look(t)
	res, err := http.Get(h.srv.URL)
	done(t, res, err)
	want := "TestCreatorTopLevelParallelA or TestCreatorTopLevelParallelB (parallel: could not tell which)"
	if o := <-got; o.Test != want || o.Place != "" {
		t.Errorf("Creator() = %+v, want %q and no place", o, want)
	}
}
