//go:build linux

package e2e_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/ledger"
)

// guardFixture is a running guardfixture binary: what it said, and its
// process.
type guardFixture struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
	// read is closed once all the binary wrote has been read into out
	// (after done, a little later: the reader may still be at the last
	// lines when the process's end is known).
	read chan struct{}

	mu   sync.Mutex
	said map[string][]string
	out  strings.Builder
}

func (f *guardFixture) get(k string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.said[k]...)
}

func (f *guardFixture) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.String()
}

// startGuardFixture runs the fixture binary's TestCreateEverything with
// mode ("guard" or "off") and then ("block" or "return"), in cache dir
// cache, and waits until it is ready.
func startGuardFixture(t *testing.T, bin, cache, img, tag, mode, then string) *guardFixture {
	t.Helper()
	return startGuardFixtureTest(t, bin, "TestCreateEverything", cache, img, tag, mode, then)
}

// startGuardFixtureTest is startGuardFixture for the fixture's test named,
// with env added.
func startGuardFixtureTest(t *testing.T, bin, test, cache, img, tag, mode, then string, env ...string) *guardFixture {
	t.Helper()
	return startGuardFixtureTimeout(t, bin, test, "5m", cache, img, tag, mode, then, env...)
}

// startGuardFixtureTimeout is startGuardFixtureTest with the binary's
// -test.timeout.
func startGuardFixtureTimeout(t *testing.T, bin, test, timeout, cache, img, tag, mode, then string, env ...string) *guardFixture {
	t.Helper()
	cmd := exec.Command(bin, "-test.v", "-test.run=^"+test+"$", "-test.timeout="+timeout)
	cmd.Env = append(os.Environ(),
		"RZ_GUARDALL_FIXTURE="+mode, "RZ_FIXTURE_IMAGE="+img, "RZ_FIXTURE_TAG="+tag, "RZ_FIXTURE_THEN="+then,
		"RIGHTSIZE_CACHE_DIR="+cache, "RIGHTSIZE_REAPER_DEBUG=1",
		// The proxy's folder: a fixture that is killed leaves it, and this
		// folder goes with the test (short: the socket's path has a limit).
		"TMPDIR="+shortDir(t))
	cmd.Env = append(cmd.Env, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	f := &guardFixture{t: t, cmd: cmd, stdin: stdin, done: make(chan error, 1), read: make(chan struct{}), said: map[string][]string{}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(f.read)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			f.mu.Lock()
			f.out.WriteString(l + "\n")
			if kv, ok := strings.CutPrefix(strings.TrimSpace(l), "fixture: "); ok {
				k, v, _ := strings.Cut(kv, "=")
				f.said[k] = append(f.said[k], v)
			}
			f.mu.Unlock()
		}
	}()
	// waited is set once Wait returned: the cleanup must not read
	// cmd.ProcessState, which Wait writes from its goroutine.
	var waited atomic.Bool
	go func() { err := cmd.Wait(); waited.Store(true); pw.Close(); f.done <- err }()
	t.Cleanup(func() {
		if !waited.Load() {
			cmd.Process.Kill()
			<-f.done
		}
	})
	poll(t, 3*time.Minute, "the guard fixture to be ready", func() (bool, string) {
		select {
		case err := <-f.done:
			f.done <- err
			return true, ""
		default:
		}
		return len(f.get("ready")) > 0, ""
	})
	if len(f.get("ready")) == 0 {
		t.Fatalf("the fixture ended before it was ready:\n%s", f.output())
	}
	return f
}

// ids is every container and network id the fixture said it created.
func (f *guardFixture) ids() (containers, networks []string) {
	return f.get("container"), f.get("network")
}

// left lists which of the fixture's containers and networks still exist.
func left(ctx context.Context, cli *client.Client, containers, networks []string) (string, error) {
	var out []string
	for _, id := range containers {
		_, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err == nil {
			out = append(out, "container "+short(id))
		} else if !harness.NotFound(err) {
			return "", err
		}
	}
	for _, id := range networks {
		_, err := cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
		if err == nil {
			out = append(out, "network "+short(id))
		} else if !harness.NotFound(err) {
			return "", err
		}
	}
	return strings.Join(out, ", "), nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// removeTagged removes what carries the fixture's tag, whoever made it.
func removeTagged(t *testing.T, cli *client.Client, tag string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := client.Filters{}.Add("label", "dev.rightsize.test.guardall="+tag)
	if cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cs.Items {
			cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		}
	}
	if ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range ns.Items {
			cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		}
	}
}

// Row 15: a test binary with sandboxtest.Main(m, sandboxtest.GuardAll())
// whose containers are all made by code that knows nothing of rightsize:
// testcontainers-go (GenericContainer, the redis module with an exec and
// a log consumer), the Docker client, `docker run -d`, and a network.
// Ended normally, it leaves nothing; three at once, one SIGKILLed, only
// that one's go, within seconds, and the others' stay; without GuardAll
// nothing passes through a proxy.
func TestRow15GuardAll(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	bin := buildGuardFixture(t)
	cli := r.eng.Client()
	ctx := t.Context()

	t.Run("ended normally", func(t *testing.T) {
		tag := nonceHex(t)
		t.Cleanup(func() { removeTagged(t, cli, tag) })
		f := startGuardFixture(t, bin, r.cache, r.img, tag, "guard", "return")
		cs, ns := f.ids()
		if want := 3; len(cs) < want || len(ns) != 1 {
			t.Fatalf("the fixture made %d containers and %d networks, want at least %d and 1:\n%s", len(cs), len(ns), want, f.output())
		}
		if err := <-f.done; err != nil {
			t.Fatalf("the fixture failed: %v\n%s", err, f.output())
		}
		if l, err := left(ctx, cli, cs, ns); err != nil || l != "" {
			t.Errorf("after the fixture ended normally, left: %s (%v)", l, err)
		}
		if run := f.get("run"); len(run) == 1 {
			if files, _ := filepath.Glob(filepath.Join(r.cache, "runs", run[0]+".*")); len(files) > 0 {
				t.Errorf("the run's ledger files remain: %q", files)
			}
		}
	})

	t.Run("three at once, one killed", func(t *testing.T) {
		tag := nonceHex(t)
		t.Cleanup(func() { removeTagged(t, cli, tag) })
		var fs [3]*guardFixture
		for i := range fs {
			fs[i] = startGuardFixture(t, bin, r.cache, r.img, tag, "guard", "block")
		}
		victim := fs[1]
		cs, ns := victim.ids()
		run := victim.get("run")
		for _, id := range cs {
			res, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Container.Config.Labels["dev.rightsize.runId"]; len(run) != 1 || got != run[0] {
				t.Errorf("container %s made without Track carries run label %q, want the binary's run %q", short(id), got, run)
			}
		}
		killed := time.Now()
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		poll(t, goneWithin, "the killed binary's containers and network to be gone", func() (bool, string) {
			l, err := left(ctx, cli, cs, ns)
			if err != nil {
				return false, err.Error()
			}
			return l == "", l
		})
		t.Logf("SIGKILL of a GuardAll binary → its %d containers (unmodified testcontainers-go, Docker client, docker run) and network gone %s later", len(cs), ms(time.Since(killed)))
		for _, other := range []*guardFixture{fs[0], fs[2]} {
			ocs, ons := other.ids()
			for _, id := range ocs {
				if exists, running, err := r.eng.ContainerState(ctx, id); err != nil || !exists || !running {
					t.Errorf("another binary's container %s: exists %v, running %v (%v); want untouched", short(id), exists, running, err)
				}
			}
			if l, _ := left(ctx, cli, nil, ons); l == "" {
				t.Errorf("another binary's network %q is gone; want untouched", ons)
			}
		}
		for _, other := range []*guardFixture{fs[0], fs[2]} {
			other.stdin.Close()
			if err := <-other.done; err != nil {
				t.Errorf("a surviving fixture failed: %v\n%s", err, other.output())
			}
			ocs, ons := other.ids()
			if l, err := left(ctx, cli, ocs, ons); err != nil || l != "" {
				t.Errorf("after a surviving fixture ended normally, left: %s (%v)", l, err)
			}
		}
	})

	t.Run("removed through the guard, then killed", func(t *testing.T) {
		tag := nonceHex(t)
		t.Cleanup(func() { removeTagged(t, cli, tag) })
		f := startGuardFixtureTest(t, bin, "TestCreateThenRemove", r.cache, r.img, tag, "guard", "block")
		run := f.get("run")
		if len(run) != 1 {
			t.Fatalf("the fixture said run %q:\n%s", run, f.output())
		}
		// idName splits what the fixture said: "id name".
		idName := func(k string) (ids, names []string) {
			for _, v := range f.get(k) {
				id, name, _ := strings.Cut(v, " ")
				ids, names = append(ids, id), append(names, name)
			}
			return ids, names
		}
		keptIDs, kept := idName("container")
		keptNetIDs, keptNets := idName("network")
		_, gone := idName("gone")
		_, goneNets := idName("gone_network")
		if len(kept) != 3 || len(keptNets) != 1 || len(gone) != 2 || len(goneNets) != 1 {
			t.Fatalf("the fixture said containers %q, networks %q, gone %q and %q:\n%s", kept, keptNets, gone, goneNets, f.output())
		}

		// The ledger lists what is up, and nothing the test removed: a
		// sweep that removes by name (Node's) would remove whatever has
		// that name by then.
		rf, err := ledger.ReadRun(r.cache, run[0])
		if err != nil {
			t.Fatal(err)
		}
		lists := rf.ReadLists()
		for _, n := range kept {
			if !slices.Contains(lists.Sandboxes, n) {
				t.Errorf("the run's ledger does not list %s, which is up (it lists %q)", n, lists.Sandboxes)
			}
		}
		for _, n := range gone {
			if slices.Contains(lists.Sandboxes, n) {
				t.Errorf("the run's ledger still lists %s, which the test removed through the guard (it lists %q)", n, lists.Sandboxes)
			}
		}
		if !slices.Equal(lists.Networks, keptNets) {
			t.Errorf("the run's ledger lists networks %q, want %q (%q was removed)", lists.Networks, keptNets, goneNets)
		}
		// A keep-alive name without its label is refused.
		ref := f.get("refused")
		if len(ref) != 1 || !strings.Contains(ref[0], "keep-alive") {
			t.Errorf("a container named as a keep-alive sandbox, without its label: %q, want refused", ref)
		}
		if len(ref) == 1 {
			name, _, _ := strings.Cut(ref[0], " ")
			if _, err := cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{}); !harness.NotFound(err) {
				t.Errorf("the refused %s exists: %v", name, err)
			}
		}

		if err := f.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Everything it kept goes, the bare label and the extra mark too.
		poll(t, goneWithin, "the killed binary's containers and network to be gone", func() (bool, string) {
			l, err := left(ctx, cli, keptIDs, keptNetIDs)
			if err != nil {
				return false, err.Error()
			}
			return l == "", l
		})
		// The fate counts what was up: nothing the test removed itself.
		var fate ledger.FateFile
		poll(t, goneWithin, "the run's fate", func() (bool, string) {
			fs := r.fatesOf(run[0])
			if len(fs) == 0 {
				return false, "none yet"
			}
			fate = fs[0]
			return true, ""
		})
		if fate.Err != nil {
			t.Fatalf("the fate: %v", fate.Err)
		}
		var removed, others []string
		for _, it := range fate.Items {
			if it.Outcome == ledger.Removed {
				removed = append(removed, it.Kind+" "+it.Name)
			} else {
				others = append(others, fmt.Sprintf("%s %s %s: %s", it.Kind, it.ID, it.Name, it.Outcome))
			}
		}
		var want []string
		for _, n := range kept {
			want = append(want, "sandbox "+n)
		}
		want = append(want, "network "+keptNets[0])
		slices.Sort(removed)
		slices.Sort(want)
		if !slices.Equal(removed, want) || len(others) > 0 {
			t.Errorf("the fate says removed %q and %q; want removed %q and nothing else (by %s)", removed, others, want, fate.By)
		}
	})

	t.Run("off: nothing proxied", func(t *testing.T) {
		tag := nonceHex(t)
		t.Cleanup(func() { removeTagged(t, cli, tag) })
		f := startGuardFixture(t, bin, r.cache, r.img, tag, "off", "block")
		if h := f.get("docker_host"); len(h) != 1 || h[0] != os.Getenv("DOCKER_HOST") {
			t.Errorf("without GuardAll the fixture saw DOCKER_HOST=%q, want it unchanged (%q)", h, os.Getenv("DOCKER_HOST"))
		}
		cs, _ := f.ids()
		for _, id := range cs {
			res, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := res.Container.Config.Labels["dev.rightsize.runId"]; ok {
				t.Errorf("without GuardAll, container %s carries a run label (%s)", short(id), v)
			}
		}
		f.stdin.Close()
		<-f.done
	})
}

// buildGuardFixture builds the guard fixture's test binary.
func buildGuardFixture(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "guardfixture.test")
	build := exec.Command(goTool(t), "test", "-c", "-o", bin, "./guardfixture")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./guardfixture: %v\n%s", err, out)
	}
	return bin
}

// nonceHex is 8 random hex digits for a test's tag.
func nonceHex(t *testing.T) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// TestGuardAllOrigins: each create through GuardAll's proxy is labelled
// with what made it, wherever it came from: the Setup, a test, a subtest
// (whose name no stack holds), a `docker run` child, a goroutine that
// outlived its test, one of two parallel tests, TestMain after the tests.
// The fixture (mode "origin") checks each label itself and says which
// held.
func TestGuardAllOrigins(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	bin := filepath.Join(t.TempDir(), "guardfixture.test")
	if out, err := exec.Command(goTool(t), "test", "-c", "-o", bin, "./guardfixture").CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./guardfixture: %v\n%s", err, out)
	}
	tag := nonceHex(t)
	t.Cleanup(func() { removeTagged(t, r.eng.Client(), tag) })
	cmd := exec.Command(bin, "-test.v", "-test.run=^TestOrigin", "-test.timeout=5m")
	cmd.Env = append(os.Environ(),
		"RZ_GUARDALL_FIXTURE=origin", "RZ_FIXTURE_IMAGE="+r.img, "RZ_FIXTURE_TAG="+tag,
		"RIGHTSIZE_CACHE_DIR="+r.cache, "TMPDIR="+shortDir(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the fixture failed: %v\n%s", err, out)
	}
	var held, bad []string
	for l := range strings.Lines(string(out)) {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "fixture: origin="); ok {
			held = append(held, v)
		}
		if v, ok := strings.CutPrefix(l, "fixture: origin-bad="); ok {
			bad = append(bad, v)
		}
	}
	want := []string{"setup", "a test", "a subtest", "a goroutine that outlived its test", "parallel tests", "after the tests"}
	if _, err := exec.LookPath("docker"); err == nil {
		want = append(want, "docker run")
	}
	for _, w := range want {
		if !slices.Contains(held, w) {
			t.Errorf("the fixture did not say the origin of %q held", w)
		}
	}
	if len(bad) > 0 {
		t.Errorf("origins that did not hold:\n  %s", strings.Join(bad, "\n  "))
	}
	if t.Failed() {
		t.Logf("the fixture's output:\n%s", out)
	}
}
