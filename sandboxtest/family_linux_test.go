package sandboxtest_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

func init() {
	helperRoles["empty-cache-dir"] = helperEmptyCacheDir
	helperRoles["family-owner"] = helperFamilyOwner
}

// helperFamilyOwner starts a sandbox and a local process, says what they
// are, and blocks.
func helperFamilyOwner(t *testing.T) {
	g := sandboxtest.Start(t, sandboxtest.Spec{Image: testimage.Busybox(t), Cmd: []string{testimage.ServerPath}})
	p := sandboxtest.StartProcess(t, exec.Command("sleep", "600"))
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("run", in.RunID)
	proctest.Say("sandbox", g.Name())
	proctest.Say("pid", strconv.Itoa(p.Pid()))
	proctest.Block()
}

// TestSiblingReapLeavesGoWhatItNeeds: when another member reaps a dead Go
// run, it removes the sandboxes it lists by name and deletes exactly
// .json, .sandboxes and .networks (sweep.ts reapRun and ledger.ts
// deleteRunRecordFiles, rightsize-node 0b3b667; Sweeper.kt reap,
// rightsize-kotlin db2958f; ledger.rs delete_files_locked, rightsize-rust
// 7fe6fa92). The run's local process is in .processes, which they leave;
// Go's own record is left with it, so Go's next sweep still judges the run
// dead and ends the process. Real engine, real processes; the members'
// reap is a stand-in doing what their sources do.
func TestSiblingReapLeavesGoWhatItNeeds(t *testing.T) {
	proctest.NeedHostPidNamespace(t) // the family record is written only there
	r := newRig(t)
	d, err := docker.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.DefaultEndpoint() {
		t.Skipf("the engine these tests use (%s) is not the default one, where the other members sweep: a run on it is never shown to them", d.Endpoint())
	}
	cache := t.TempDir()
	// No watchdog: a run whose watchdog died too, what a sweep is for.
	h := startHelper(t, "family-owner", cache, "RIGHTSIZE_REAPER=sweep")
	run, name := h.Expect("run"), h.Expect("sandbox")
	pid, err := strconv.Atoi(h.Expect("pid"))
	if err != nil {
		t.Fatal(err)
	}
	mark := proctree.EnvMark + "=" + run + ".p"
	t.Cleanup(func() { killMarked(t, pid, mark) })
	r.closeRun(run)
	h.KillAndWait()
	if !marked(pid, mark) {
		t.Fatalf("the dead run's process %d is not running: nothing left to test", pid)
	}
	runs := filepath.Join(cache, ledger.RunsDir)
	rec, sbx, nets := ledger.Paths(runs, run)
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatalf("the dead Go run on the default engine has no family record: %v", err)
	}

	// The member's reap: its record parses (number pid, string startedIso,
	// backend docker) and its pid is dead; it removes each listed name and
	// deletes its three files.
	if rf, err := ledger.ParseRecord(data); err != nil || rf.Backend != "docker" || rf.PID != h.Cmd.Process.Pid {
		t.Fatalf("the family record %s: %+v, %v", data, rf, err)
	}
	for _, n := range readNames(t, sbx) {
		r.remove(n)
	}
	for _, p := range []string{rec, sbx, nets} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if _, ok := r.inspect(name); ok {
		t.Fatalf("the member's reap left %s", name)
	}

	rep, err := reaper.Sweep(t.Context(), d, reaper.WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	var rr reaper.RunReport
	for _, x := range rep.Runs {
		if x.ID == run {
			rr = x
		}
	}
	if rr.Decision != reaper.Reaped {
		t.Errorf("Go's sweep of what the member left of run %s: %s (%s), want %s; %+v", run, rr.Decision, rr.Reason, reaper.Reaped, rr)
	}
	proctest.WaitUntil(t, 10*time.Second, "the dead run's process to end", func() bool { return !marked(pid, mark) })
	if left := dirNames(t, runs); len(left) != 0 {
		t.Errorf("the sweep left %q of the run", left)
	}
}

// readNames reads a line file's names.
func readNames(t testing.TB, path string) []string {
	t.Helper()
	lf, err := ledger.ReadLines(path)
	if err != nil {
		t.Fatal(err)
	}
	return lf.Names
}

// marked reports whether pid runs (not a zombie) with mark, a prefix of
// one of its environment's entries: the process, never one that took its
// number.
func marked(pid int, mark string) bool {
	st, err := proctree.ReadStat(pid)
	if err != nil || st.Zombie() {
		return false
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if strings.HasPrefix(kv, mark) {
			return true
		}
	}
	return false
}

// killMarked ends pid's process group when pid is still the marked
// process, for a test's cleanup.
func killMarked(t testing.TB, pid int, mark string) {
	if marked(pid, mark) {
		syscall.Kill(-pid, syscall.SIGKILL)
		t.Logf("cleanup killed the process group of %d", pid)
	}
}

// helperEmptyCacheDir sets up the session and says where its ledger is.
func helperEmptyCacheDir(t *testing.T) {
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ledger.TellEmptyCacheDir(os.Stderr) // a second caller in the process says nothing more
	proctest.Say("cachedir", in.CacheDir)
	proctest.Block()
}

// TestEmptyCacheDirSaysSo: rightsize-go reads RIGHTSIZE_CACHE_DIR="" as
// unset (go test runs each package in its own folder, so "" as the
// current directory would split the ledger per package), where the other
// members read it as the current directory (cache-dir.ts,
// CacheDir.kt, cache_dir.rs). A process says so once, on stderr.
func TestEmptyCacheDirSaysSo(t *testing.T) {
	testimage.Busybox(t) // an engine test: the session resolves the backend
	home := t.TempDir()
	h := startHelper(t, "empty-cache-dir", "", "HOME="+home, "RIGHTSIZE_REAPER=sweep")
	got := h.Expect("cachedir")
	h.Finish()
	if want := filepath.Join(home, ".cache", "rightsize"); got != want {
		t.Errorf("with %s empty the ledger is in %s, want the default %s", ledger.EnvCacheDir, got, want)
	}
	const note = ledger.EnvCacheDir + " is set but empty"
	if n := strings.Count(h.Stderr(), note); n != 1 {
		t.Errorf("the process said %q %d times on stderr, want once:\n%s", note, n, h.Stderr())
	}
	if !strings.Contains(h.Stderr(), "current directory") {
		t.Errorf("the note does not say what the other members do:\n%s", h.Stderr())
	}
}

// registryProbe is a wait strategy that notes whether the keep-alive's
// registry entry exists while the sandbox is waited for, then lets it be
// ready, or not.
type registryProbe struct {
	path  string
	seen  *atomic.Bool
	calls *atomic.Int32
	fail  bool
}

func (p registryProbe) WaitUntilReady(context.Context, wait.StrategyTarget) error {
	p.calls.Add(1)
	if _, err := os.Stat(p.path); err == nil {
		p.seen.Store(true)
	}
	if p.fail {
		return errors.New("not ready, on purpose")
	}
	return nil
}

// TestReuseRegistryAfterReady: the family writes a keep-alive's registry
// entry once its sandbox passed its wait (generic-container.ts
// adoptOrCreate, rightsize-node 0b3b667; GenericContainer.kt
// createReuseFresh, rightsize-kotlin db2958f; reuse.rs write_atomic, "called
// only after the reused container's own wait strategy has already
// succeeded", rightsize-rust 54732f96), and removes a running rz-reuse-*
// that has no entry, or whose entry's sandbox fails its wait. So Go writes
// the entry only once the sandbox is ready; and one that never became
// ready is removed, not left running without an entry for the next test
// to adopt unready.
func TestReuseRegistryAfterReady(t *testing.T) {
	r := newRig(t)
	t.Setenv(sandboxtest.EnvReuse, "1")
	in := r.session()
	for _, tc := range []struct {
		name  string
		ready bool
	}{{"ready", true}, {"never ready", false}} {
		t.Run(tc.name, func(t *testing.T) {
			spec := reuseSpec(testimage.Busybox(t), nonce(t))
			hash := sandboxtest.ReuseIdentity(spec).Hash()
			name := ledger.ReuseName(hash)
			t.Cleanup(func() { r.remove(name) })
			probe := registryProbe{path: ledger.ReusePath(in.CacheDir, hash), seen: new(atomic.Bool), calls: new(atomic.Int32), fail: !tc.ready}
			spec.WaitingFor = probe
			rec := &recordingTB{TB: t}
			var g *sandboxtest.Guard
			rec.run(func(tb testing.TB) { g = sandboxtest.Start(tb, spec) })
			if probe.calls.Load() == 0 {
				t.Fatal("the wait strategy was never called")
			}
			if probe.seen.Load() {
				t.Errorf("the registry entry %s existed while the sandbox was waited for: a member adopting it then, and failing its own wait, removes it", probe.path)
			}
			_, err := ledger.ReadReuseEntry(in.CacheDir, hash)
			if !tc.ready {
				if len(rec.fatals) == 0 {
					t.Fatalf("Start of a keep-alive that never became ready did not fail the test")
				}
				if err == nil {
					t.Errorf("a keep-alive that never became ready has a registry entry")
				}
				if _, ok := r.inspect(name); ok {
					t.Errorf("the keep-alive %s that never became ready is still there, without an entry: the next test would adopt it unready", name)
				}
				return
			}
			if len(rec.fatals)+len(rec.errors) > 0 {
				t.Fatalf("Start failed: %q %q", rec.fatals, rec.errors)
			}
			if err != nil {
				t.Errorf("no registry entry after the sandbox was ready: %v", err)
			}
			if g.Name() != name {
				t.Errorf("keep-alive named %s, want %s", g.Name(), name)
			}
		})
	}
}
