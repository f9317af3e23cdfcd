package sandboxtest_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The idle time-to-live of keep-alive sandboxes, with real processes: each
// keep-alive is made (and let go, or held) by a helper process of its own,
// and a helper process's first use sweeps. Each test has a cache dir and a
// TMPDIR of its own: its sweeps judge its keep-alives alone (the engine is
// shared, and a keep-alive nothing here records is never judged).

// ttl is the time-to-live the tests ask for: short, and longer than it
// takes a helper to start and sweep.
const ttl = 2 * time.Second

// ttlKeepAlive is one keep-alive sandbox of a test's own.
type ttlKeepAlive struct {
	nonce, img, hash, name string
}

// ttlImage is the test image under an image repository of this test's
// own: keep-alives of one test, place and repository supersede each
// other across every cache dir, and the tests here run in parallel with
// the same test helper and place.
func (r *rig) ttlImage(t *testing.T) string {
	t.Helper()
	ref := "rightsize-test/ttl-" + nonce(t) + ":1"
	if _, err := r.cli.ImageTag(context.Background(), client.ImageTagOptions{Source: testimage.Busybox(t), Target: ref}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{}) })
	return ref
}

func (r *rig) ttlKeepAlive(img string) ttlKeepAlive {
	k := ttlKeepAlive{nonce: nonce(r.t), img: img}
	k.hash = sandboxtest.ReuseIdentity(reuseSpec(img, k.nonce)).Hash()
	k.name = ledger.ReuseName(k.hash)
	r.t.Cleanup(func() { r.remove(k.name) })
	return k
}

// env is the environment of a helper that makes or adopts k, in tmp.
func (k ttlKeepAlive) env(tmp string, extra ...string) []string {
	return append([]string{sandboxtest.EnvReuse + "=1", "RZ_TEST_REUSE_NONCE=" + k.nonce, "RZ_TEST_REUSE_IMAGE=" + k.img}, append(tmpEnv(tmp), extra...)...)
}

// helperKeepAlive starts the keep-alive of RZ_TEST_REUSE_NONCE, from
// RZ_TEST_REUSE_IMAGE, with the Spec.ReuseTTL of RZ_TEST_REUSE_TTL when
// set, says its name and id, and lets it go when its stdin closes (its
// test ends).
func helperKeepAlive(t *testing.T) {
	spec := reuseSpec(os.Getenv("RZ_TEST_REUSE_IMAGE"), os.Getenv("RZ_TEST_REUSE_NONCE"))
	if v := os.Getenv("RZ_TEST_REUSE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		spec.ReuseTTL = d
	}
	g := sandboxtest.Start(t, spec)
	proctest.Say("name", g.Name())
	proctest.Say("id", g.Sandbox().ID())
	proctest.Block()
}

// helperTTLSweeper is a test process's first use, which sweeps: it says
// what the sweep did with each keep-alive sandbox (ka.<name>=<outcome>,
// why.<name>=<note>), and ends.
func helperTTLSweeper(t *testing.T) {
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range in.Sweep.KeepAlives {
		proctest.Say("ka."+it.Name, string(it.Outcome))
		proctest.Say("why."+it.Name, it.Note)
	}
	proctest.Say("problem", in.Sweep.KeepAliveProblem)
	proctest.Say("swept", "1")
}

// sweepAt runs a helper's first use in cache and tmp, with env, and
// returns it, ended.
func sweepAt(t *testing.T, cache, tmp string, env ...string) *proctest.Helper {
	t.Helper()
	s := startHelper(t, "ttl-sweeper", cache, append(tmpEnv(tmp), env...)...)
	s.Expect("swept")
	s.Finish()
	if p, _ := s.Value("problem"); p != "" {
		t.Errorf("the sweep's keep-alive problem: %s", p)
	}
	return s
}

// idleFor waits until d has passed since the last use of everything
// made before it is called: time is what this feature is about.
func idleFor(d time.Duration) { time.Sleep(d + 100*time.Millisecond) }

// useRecords lists the use records of name in the cache dir and in tmp's
// use dir.
func useRecords(t *testing.T, cache, tmp, name string) []string {
	t.Helper()
	var out []string
	use, err := ledger.UseDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(cache, ledger.ReuseDir), use} {
		m, _ := filepath.Glob(filepath.Join(dir, name+".*.used"))
		out = append(out, m...)
	}
	return out
}

// TestReuseTTLExpiredGoneInUseKept: with RIGHTSIZE_REUSE_TTL, a test
// process's first use removes the keep-alive that no process used for
// that long, with its registry entry and use records, and says so; one
// that a live test process holds, though made as long ago, is kept.
func TestReuseTTLExpiredGoneInUseKept(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cache, tmp := t.TempDir(), t.TempDir()
	img := r.ttlImage(t)
	idle, held := r.ttlKeepAlive(img), r.ttlKeepAlive(img)

	a := startHelper(t, "keepalive", cache, idle.env(tmp)...)
	idleID := a.Expect("id")
	a.Finish()
	b := startHelper(t, "keepalive", cache, held.env(tmp)...)
	heldID := b.Expect("id")
	if len(useRecords(t, cache, tmp, idle.name)) != 2 || len(useRecords(t, cache, tmp, held.name)) != 2 {
		t.Fatalf("use records: %q and %q, want two each (cache dir, use dir)", useRecords(t, cache, tmp, idle.name), useRecords(t, cache, tmp, held.name))
	}
	idleFor(ttl)

	s := sweepAt(t, cache, tmp, reaper.EnvReuseTTL+"="+ttl.String())
	if got, _ := s.Value("ka." + idle.name); got != string(ledger.Removed) {
		t.Errorf("the sweep did %q with the idle keep-alive %s, want removed\n%s", got, idle.name, s.Output())
	}
	if got, ok := s.Value("ka." + held.name); ok {
		t.Errorf("the sweep did %q with the keep-alive %s a live process holds, want it left out", got, held.name)
	}
	if !strings.Contains(s.Output(), "rightsize: keep-alive sandbox "+idle.name+": removed (idle since") {
		t.Errorf("the sweeping test process did not tell the removal on stderr:\n%s", s.Output())
	}
	if c, ok := r.inspect(idle.name); ok {
		t.Errorf("the idle keep-alive %s (%s) is still there: %s", idle.name, idleID, c.ID)
	}
	if _, err := os.Lstat(ledger.ReusePath(cache, idle.hash)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the idle keep-alive's registry entry is still there (%v)", err)
	}
	if left := useRecords(t, cache, tmp, idle.name); len(left) > 0 {
		t.Errorf("the idle keep-alive's use records are still there: %q", left)
	}
	if c, ok := r.inspect(held.name); !ok || c.ID != heldID || !c.State.Running {
		t.Errorf("the keep-alive %s a live test process holds was not kept running", held.name)
	}
	b.Finish()
}

// TestReuseTTLOffByDefault: without RIGHTSIZE_REUSE_TTL and Spec.ReuseTTL
// no sweep touches a keep-alive, however long it has been idle: the
// sweep has nothing to say of them, and their files stay.
func TestReuseTTLOffByDefault(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cache, tmp := t.TempDir(), t.TempDir()
	k := r.ttlKeepAlive(r.ttlImage(t))
	a := startHelper(t, "keepalive", cache, k.env(tmp)...)
	id := a.Expect("id")
	a.Finish()
	idleFor(ttl)

	s := sweepAt(t, cache, tmp)
	if keys := s.Keys("ka."); len(keys) > 0 {
		t.Errorf("a sweep with no time-to-live acted on keep-alives: %q", keys)
	}
	if c, ok := r.inspect(k.name); !ok || c.ID != id || !c.State.Running {
		t.Errorf("the keep-alive %s is not running as it was", k.name)
	}
	if _, err := os.Lstat(ledger.ReusePath(cache, k.hash)); err != nil {
		t.Errorf("its registry entry: %v", err)
	}
	if n := len(useRecords(t, cache, tmp, k.name)); n != 2 {
		t.Errorf("%d use records, want the 2 its process wrote", n)
	}
}

// TestReuseTTLSuperseded: the Spec.ReuseTTL of a keep-alive, recorded by
// the process that uses it, applies with no RIGHTSIZE_REUSE_TTL to the
// older keep-alive it superseded (the same test, the same place in its
// code, the same image repository, another spec hash): that one goes once
// idle for it. One of another image repository from the same place, as
// idle but superseded by nothing, stays.
func TestReuseTTLSuperseded(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cache, tmp := t.TempDir(), t.TempDir()
	img, otherRepo := r.ttlImage(t), r.ttlImage(t)
	old, other, newer := r.ttlKeepAlive(img), r.ttlKeepAlive(otherRepo), r.ttlKeepAlive(img)

	for _, k := range []ttlKeepAlive{old, other} {
		h := startHelper(t, "keepalive", cache, k.env(tmp)...)
		h.Expect("id")
		h.Finish()
	}
	// The engine tells creation times to the second.
	idleFor(time.Second)
	n := startHelper(t, "keepalive", cache, newer.env(tmp, "RZ_TEST_REUSE_TTL="+ttl.String())...)
	n.Expect("id")
	c, ok := r.inspect(newer.name)
	if !ok {
		t.Fatalf("no keep-alive %s", newer.name)
	}
	if got := c.Config.Labels[backend.LabelTest]; got != "TestGuardHelper" {
		t.Errorf("label %s = %q, want the test that made it, TestGuardHelper", backend.LabelTest, got)
	}
	if got := c.Config.Labels[backend.LabelTestPlace]; !strings.HasPrefix(got, "ttl_test.go:") {
		t.Errorf("label %s = %q, want ttl_test.go:<line>, where the test's code started it", backend.LabelTestPlace, got)
	}
	idleFor(ttl)

	s := sweepAt(t, cache, tmp)
	if got, _ := s.Value("ka." + old.name); got != string(ledger.Removed) {
		t.Errorf("the sweep did %q with the superseded keep-alive %s, want removed\n%s", got, old.name, s.Output())
	}
	if why, _ := s.Value("why." + old.name); !strings.Contains(why, "superseded by "+newer.name) {
		t.Errorf("the removal of %s says %q, want it superseded by %s", old.name, why, newer.name)
	}
	if _, ok := r.inspect(old.name); ok {
		t.Errorf("the superseded keep-alive %s is still there", old.name)
	}
	if got, ok := s.Value("ka." + other.name); ok || !r.running(other.name) {
		t.Errorf("the keep-alive of another image repository %s: the sweep did %q, running %v; want it untouched", other.name, got, r.running(other.name))
	}
	if !r.running(newer.name) {
		t.Errorf("the keep-alive in use %s is gone", newer.name)
	}
	n.Finish()
}

// TestReuseTTLSpecAlone: a Spec.ReuseTTL applies to its own keep-alive
// once its process let it go, with no RIGHTSIZE_REUSE_TTL anywhere.
func TestReuseTTLSpecAlone(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cache, tmp := t.TempDir(), t.TempDir()
	k := r.ttlKeepAlive(r.ttlImage(t))
	a := startHelper(t, "keepalive", cache, k.env(tmp, "RZ_TEST_REUSE_TTL="+ttl.String())...)
	a.Expect("id")
	a.Finish()
	idleFor(ttl)
	s := sweepAt(t, cache, tmp)
	if got, _ := s.Value("ka." + k.name); got != string(ledger.Removed) {
		t.Errorf("the sweep did %q with %s, idle past its Spec.ReuseTTL, want removed\n%s", got, k.name, s.Output())
	}
	if why, _ := s.Value("why." + k.name); !strings.Contains(why, "Spec.ReuseTTL") {
		t.Errorf("the removal says %q, want the Spec.ReuseTTL it went by", why)
	}
	if _, ok := r.inspect(k.name); ok {
		t.Errorf("%s is still there", k.name)
	}
}

// tmpEnv makes tmp a child process's temporary folder (os.TempDir), and
// so the folder of its keep-alive use locks and records: TMPDIR, and on
// Windows TMP and TEMP, which it reads instead.
func tmpEnv(tmp string) []string {
	env := []string{"TMPDIR=" + tmp}
	if runtime.GOOS == "windows" {
		env = append(env, "TMP="+tmp, "TEMP="+tmp)
	}
	return env
}

// TestReuseStoppedHeldKept: a keep-alive that stopped under a live test
// process holding it (an engine restart stops containers) is that
// process's. Another test asking for the same keep-alive fails, saying
// so, and removes nothing; once no process holds it, the next test
// replaces it.
func TestReuseStoppedHeldKept(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cache, tmp := t.TempDir(), t.TempDir()
	k := r.ttlKeepAlive(r.ttlImage(t))

	holder := startHelper(t, "keepalive", cache, k.env(tmp)...)
	heldID := holder.Expect("id")
	timeout := 0
	if _, err := r.cli.ContainerStop(context.Background(), k.name, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	other := startHelper(t, "keepalive", cache, k.env(tmp)...)
	if !other.Wait(2 * time.Minute) {
		t.Fatal("the second test did not end")
	}
	if _, err := other.Exited(); err == nil || !strings.Contains(other.Output(), "another process is using it") {
		t.Errorf("the second test: %v; want it to fail, saying another process uses the stopped keep-alive\n%s", err, other.Output())
	}
	if c, ok := r.inspect(k.name); !ok || c.ID != heldID {
		t.Fatalf("the stopped keep-alive %s (%s) a live process holds was removed or replaced", k.name, heldID)
	}

	holder.Finish()
	next := startHelper(t, "keepalive", cache, k.env(tmp)...)
	if id := next.Expect("id"); id == heldID {
		t.Errorf("once no process held it, the stopped keep-alive %s was adopted, not replaced", k.name)
	}
	if c, ok := r.inspect(k.name); !ok || !c.State.Running {
		t.Errorf("the keep-alive %s that replaced the stopped one is not running", k.name)
	}
	next.Finish()
}
