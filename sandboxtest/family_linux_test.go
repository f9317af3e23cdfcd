package sandboxtest_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

	d, err := docker.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
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
