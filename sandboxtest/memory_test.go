package sandboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/memory"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The tests of this file run sandboxtest's whole flow with no engine:
// owners are this binary re-executed with RIGHTSIZE_BACKEND=memory and a
// DOCKER_HOST that answers nothing, killed by SIGKILL; what removes their
// memory sandboxes is the real watchdog, or the next process's sweep.

const envMemoryRole = "RIGHTSIZE_TEST_MEMORY_ROLE"

// TestMemoryHelper is the entry point of the re-executed owners.
func TestMemoryHelper(t *testing.T) {
	switch os.Getenv(envMemoryRole) {
	case "":
		t.Skip("the helper process of the memory backend's tests")
	case "owner":
		memoryOwner(t)
	case "sweeper":
		memorySweeper(t)
	case "reuser":
		g := sandboxtest.Start(t, sandboxtest.Spec{Image: "memory/idle", Env: map[string]string{"K": "v"}, Reuse: true})
		in, err := sandboxtest.Session(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		proctest.Say("name", g.Name())
		proctest.Say("watchdog", strconv.Itoa(in.WatchdogPID))
		proctest.Block()
	default:
		role := memoryRoles[os.Getenv(envMemoryRole)]
		if role == nil {
			t.Fatalf("no memory helper role %q", os.Getenv(envMemoryRole))
		}
		role(t)
	}
}

// memoryRoles are the helper's roles a file of one system adds.
var memoryRoles = map[string]func(*testing.T){}

func startMemoryHelper(t *testing.T, role, cache string, env ...string) *proctest.Helper {
	t.Helper()
	return startMemoryHelperTimeout(t, role, cache, "2m", env...)
}

// startMemoryHelperTimeout is startMemoryHelper with the helper's
// -test.timeout.
func startMemoryHelperTimeout(t *testing.T, role, cache, timeout string, env ...string) *proctest.Helper {
	t.Helper()
	h := proctest.StartHelper(t, proctest.Spec{
		Name: "memory " + role,
		Argv: proctest.TestArgv("TestMemoryHelper", "-test.timeout="+timeout),
		Env: proctest.Environ(
			func(k string) bool { return strings.HasPrefix(k, "RIGHTSIZE_") },
			append([]string{envMemoryRole + "=" + role, "RIGHTSIZE_TEST_KEEP_ENV=1", ledger.EnvCacheDir + "=" + cache, backend.EnvBackend + "=" + backend.Memory,
				"DOCKER_HOST=unix://" + filepath.Join(cache, "no-engine.sock")}, env...)...),
	})
	h.Within = time.Minute
	return h
}

// memoryOwner starts a network and two sandboxes on it, says what they
// are, and waits to be killed.
func memoryOwner(t *testing.T) {
	n := sandboxtest.NewNetwork(t)
	var made []string
	for range 2 {
		g := sandboxtest.Start(t, sandboxtest.Spec{Image: "memory/idle", Ports: []string{"8080/tcp"}, Networks: []*sandboxtest.Network{n}})
		made = append(made, g.Name())
	}
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("backend", in.Backend)
	proctest.Say("run", in.RunID)
	proctest.Say("watchdog", strconv.Itoa(in.WatchdogPID))
	proctest.Say("network", n.Name())
	proctest.Say("sandboxes", strings.Join(made, ","))
	proctest.Block()
}

// memorySweeper starts one sandbox, so that its process sweeps, and says
// what the sweep decided of run RZ_TEST_SWEPT_RUN.
func memorySweeper(t *testing.T) {
	sandboxtest.Start(t, sandboxtest.Spec{Image: "memory/idle"})
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("run", in.RunID)
	rr, _ := in.Sweep.Run(os.Getenv("RZ_TEST_SWEPT_RUN"))
	proctest.Say("decision", string(rr.Decision))
	proctest.Say("reason", strings.ReplaceAll(rr.Reason, "\n", " "))
	proctest.Block()
}

type memoryOwned struct {
	run, network string
	sandboxes    []string
	watchdog     int
}

func readMemoryOwner(t *testing.T, h *proctest.Helper) memoryOwned {
	t.Helper()
	if got := h.Expect("backend"); got != backend.Memory {
		t.Fatalf("the owner's backend is %q, want %q", got, backend.Memory)
	}
	o := memoryOwned{run: h.Expect("run"), network: h.Expect("network"), sandboxes: strings.Split(h.Expect("sandboxes"), ",")}
	o.watchdog, _ = strconv.Atoi(h.Expect("watchdog"))
	return o
}

// left is what of o the memory folder and the ledger still hold.
func (o memoryOwned) left(t *testing.T, d memoryDriver, cache string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []string
	for _, n := range o.sandboxes {
		if _, err := d.Adopt(ctx, n); !errors.Is(err, backend.ErrNotFound) {
			out = append(out, "sandbox "+n)
		}
	}
	if errs := d.CheckOwned(ctx, backend.NetworkKind, o.run, []string{o.network}); !errors.Is(errs[0], backend.ErrNotFound) {
		out = append(out, "network "+o.network)
	}
	if ledger.HasFiles(filepath.Join(cache, ledger.RunsDir), o.run) {
		out = append(out, "the run's ledger files")
	}
	return out
}

// memoryDriver is what the tests ask of the memory backend beside
// backend.Driver.
type memoryDriver interface {
	backend.Driver
	backend.OwnershipChecker
	backend.KeepAliver
}

// memoryFolder opens the memory folder the owners of cache use (memory/
// in it, as they have no RIGHTSIZE_MEMORY_DIR).
func memoryFolder(t *testing.T, cache string) memoryDriver {
	t.Helper()
	d, err := memory.Open(filepath.Join(cache, "memory"))
	if err != nil {
		t.Fatal(err)
	}
	return d.(memoryDriver)
}

func checkMemoryAlive(t *testing.T, o memoryOwned, d memoryDriver, cache string) {
	t.Helper()
	if left := o.left(t, d, cache); len(left) != len(o.sandboxes)+2 {
		t.Fatalf("while its owner lives, of its 2 sandboxes, network and run files there are only %q (the cache holds %q)", left, treeFiles(t, cache))
	}
}

func TestMemoryWatchdogAfterSIGKILL(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	h := startMemoryHelper(t, "owner", cache)
	o := readMemoryOwner(t, h)
	if o.watchdog <= 0 {
		t.Fatalf("the owner has no watchdog (pid %d)", o.watchdog)
	}
	d := memoryFolder(t, cache)
	checkMemoryAlive(t, o, d, cache)

	start := time.Now()
	h.KillAndWait()
	proctest.WaitUntil(t, 20*time.Second, "the watchdog to remove the killed owner's memory sandboxes, network and run files", func() bool {
		return len(o.left(t, d, cache)) == 0
	})
	t.Logf("SIGKILL → %d memory sandboxes, their network and the run's files gone in %s", len(o.sandboxes), time.Since(start).Round(time.Millisecond))
	proctest.WaitUntil(t, 20*time.Second, "the watchdog to exit", func() bool {
		_, alive, err := ledger.Lookup(o.watchdog)
		return err == nil && !alive
	})
}

func TestMemorySweepAfterSIGKILL(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	h := startMemoryHelper(t, "owner", cache, reaper.EnvReaper+"=sweep")
	o := readMemoryOwner(t, h)
	if o.watchdog != 0 {
		t.Errorf("%s=sweep spawned watchdog pid %d", reaper.EnvReaper, o.watchdog)
	}
	d := memoryFolder(t, cache)
	h.KillAndWait()
	// Nothing is left to remove them until the next process starts.
	checkMemoryAlive(t, o, d, cache)

	nextSweepReaps(t, o, d, cache)
	ents, err := os.ReadDir(filepath.Join(cache, "memory"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			objs = append(objs, e.Name())
		}
	}
	if len(objs) > 0 {
		t.Errorf("the sweeper ended cleanly and its memory folder still holds %q", slices.Clip(objs))
	}
}

// nextSweepReaps starts the next process, a sweeper, and checks that its
// first Start's sweep reaped o's dead run (its sandboxes looked up through d); it
// returns once the sweeper's own watchdog has ended its run (not after
// the test has removed the folder it works in).
func nextSweepReaps(t *testing.T, o memoryOwned, d memoryDriver, cache string) {
	t.Helper()
	s := startMemoryHelper(t, "sweeper", cache, "RZ_TEST_SWEPT_RUN="+o.run)
	if got := s.Expect("decision"); got != string(reaper.Reaped) {
		t.Errorf("the next process's sweep decided %q of the dead run, want %q: %s", got, reaper.Reaped, s.Expect("reason"))
	}
	if left := o.left(t, d, cache); len(left) > 0 {
		t.Errorf("once the next process's first Start returned, the dead run still has %q", left)
	}
	swept := s.Expect("run")
	s.Finish()
	proctest.WaitUntil(t, 20*time.Second, "the sweeper's watchdog to finish", func() bool {
		return ledger.LiveWatchdog(cache, swept) == 0
	})
	// Its owner ended normally: its watchdog, ending, takes its mark along.
	proctest.WaitUntil(t, 10*time.Second, "the sweeper's watchdog mark to go (its owner ended normally)", func() bool {
		marks, _ := filepath.Glob(filepath.Join(ledger.FatesPath(cache), "."+swept+".watchdog-*"))
		return len(marks) == 0
	})
}

// TestMemorySessionKilled: the owner and its watchdog both killed (a CI
// runner that kills the whole job): nothing removes the sandboxes until
// the next process's first use, whose sweep does.
func TestMemorySessionKilled(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	h := startMemoryHelper(t, "owner", cache)
	o := readMemoryOwner(t, h)
	if o.watchdog <= 0 {
		t.Fatalf("the owner has no watchdog (pid %d)", o.watchdog)
	}
	d := memoryFolder(t, cache)
	checkMemoryAlive(t, o, d, cache)
	// The watchdog first: killed second, it could have begun its work.
	// While the owner lives it holds the watchdog unreaped, so its pid
	// names no other process.
	wd, err := os.FindProcess(o.watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if err := wd.Kill(); err != nil {
		t.Fatalf("kill the watchdog, pid %d: %v", o.watchdog, err)
	}
	h.KillAndWait()
	proctest.WaitUntil(t, 20*time.Second, "the killed watchdog to be gone", func() bool {
		_, alive, err := ledger.Lookup(o.watchdog)
		return err == nil && !alive
	})
	// Nothing is left to remove them until the next process starts.
	checkMemoryAlive(t, o, d, cache)

	nextSweepReaps(t, o, d, cache)
}

// TestMemoryGoTestTimeout: `go test -timeout` ends the owner, its test
// binary's alarm panicking from a goroutine of its own; no Cleanup runs,
// and the watchdog removes everything.
func TestMemoryGoTestTimeout(t *testing.T) {
	t.Parallel()
	// The alarm counts from the binary's start: where a loaded machine has
	// not made everything by then, a longer one is tried.
	for _, timeout := range []string{"4s", "8s", "16s", "32s"} {
		cache := t.TempDir()
		h := startMemoryHelperTimeout(t, "owner", cache, timeout)
		if _, err := h.Get("sandboxes", time.Minute); err != nil {
			if h.Wait(0) {
				t.Logf("-test.timeout=%s: the owner ended before it had made everything; trying a longer one", timeout)
				continue
			}
			t.Fatal(err)
		}
		o := readMemoryOwner(t, h)
		d := memoryFolder(t, cache)
		if !h.Wait(time.Minute) {
			t.Fatalf("the owner did not end within a minute of its -test.timeout=%s", timeout)
		}
		if out := h.Output(); !strings.Contains(out, "panic: test timed out after "+timeout) {
			t.Fatalf("the owner ended (%s) without its alarm's panic:\n%s", h.Status(), out)
		}
		ended := time.Now()
		proctest.WaitUntil(t, 20*time.Second, "the watchdog to remove the timed-out owner's memory sandboxes, network and run files", func() bool {
			return len(o.left(t, d, cache)) == 0
		})
		t.Logf("-test.timeout=%s → %d memory sandboxes, their network and the run's files gone %s after the owner ended", timeout, len(o.sandboxes), time.Since(ended).Round(time.Millisecond))
		return
	}
	t.Fatal("the owner never made everything before its alarm, even with -test.timeout=32s")
}

// TestMemoryKeepAlive: a keep-alive memory sandbox outlives the process
// that made it, is adopted by the next, and no sweep or watchdog of either
// run removes it.
func TestMemoryKeepAlive(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	d := memoryFolder(t, cache)
	first := startMemoryHelper(t, "reuser", cache, "RIGHTSIZE_REUSE=1")
	name := first.Expect("name")
	if !strings.HasPrefix(name, backend.KeepAlivePrefix) {
		t.Fatalf("a Reuse spec's sandbox is %q, want a %s name", name, backend.KeepAlivePrefix)
	}
	wd, _ := strconv.Atoi(first.Expect("watchdog"))
	first.KillAndWait()
	if wd > 0 {
		// The killed run's watchdog has done all it will once it exits.
		proctest.WaitUntil(t, 20*time.Second, "the killed owner's watchdog to exit", func() bool {
			_, alive, err := ledger.Lookup(wd)
			return err == nil && !alive
		})
	}
	second := startMemoryHelper(t, "reuser", cache, "RIGHTSIZE_REUSE=1")
	if got := second.Expect("name"); got != name {
		t.Errorf("the next process got keep-alive %q, want %q adopted", got, name)
	}
	second.Finish()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kas, err := d.KeepAlives(ctx)
	if err != nil || len(kas) != 1 || kas[0].Name != name {
		t.Fatalf("after both processes ended (one killed), the keep-alives are %+v, %v; want %s alone", kas, err, name)
	}
	if err := d.RemoveKeepAlive(ctx, name, kas[0].KeepAlive); err != nil {
		t.Errorf("remove keep-alive %s: %v", name, err)
	}
}

func init() {
	memoryRoles["volume"] = func(t *testing.T) { memoryObject(t, func(tb testing.TB) { sandboxtest.NewVolume(tb) }) }
	memoryRoles["image"] = func(t *testing.T) {
		memoryObject(t, func(tb testing.TB) { sandboxtest.NewImage(tb, sandboxtest.Build{Dir: t.TempDir()}) })
	}
}

// fatalTB takes a test's Fatalf, and ends the goroutine that called it.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// memoryObject asks create for a named volume or an image, which the memory
// backend has not, and says how it failed ("" when it did not).
func memoryObject(t *testing.T, create func(testing.TB)) {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		create(tb)
	}()
	<-done
	proctest.Say("failed", strconv.Quote(tb.msg))
	proctest.Block()
}

// NewVolume and NewImage on a backend without named volumes or builds
// fail the test at once, naming the backend, before anything is made.
func TestNewVolumeWithoutVolumes(t *testing.T) {
	for _, c := range []struct{ role, want string }{
		{"volume", "the memory backend has no named volumes"},
		{"image", "the memory backend builds no images"},
	} {
		t.Run(c.role, func(t *testing.T) {
			h := startMemoryHelper(t, c.role, t.TempDir())
			msg, err := strconv.Unquote(h.Expect("failed"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, "sandboxtest: "+c.role) {
				t.Errorf("%s on the memory backend failed with %q; want it to say %q", c.role, msg, c.want)
			}
			h.Finish()
		})
	}
}
