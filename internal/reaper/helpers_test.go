package reaper_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Helpers shared by the tests of this package. The engine tests use the
// real Docker backend against the engine that runs here; every container
// and network a test makes is named by the test (prefix rz-rt) and removed
// by name in its cleanup, whatever the reaper did with it.

func init() {
	// A helper process of these tests may be spawned as a native watchdog.
	reaper.WatchdogMain()
	// Nothing here starts Ryuk, whose image could not be pulled anyway; set
	// before testcontainers-go reads its configuration, at first use.
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !ok {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	// The watchdogs these tests spawn (their owners inherit this) make one
	// pass: the tests assert every removal call. The second pass, and its
	// default delay, are tested in reaper/scripts and by the crash matrix.
	os.Setenv("RIGHTSIZE_WATCHDOG_SETTLE", "0")
}

func randHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}

// stubBackend stands for an engine that is not Docker (msb): every removal
// succeeds.
type stubBackend struct{ name, endpoint string }

func (s stubBackend) Name() string          { return s.name }
func (s stubBackend) Endpoint() string      { return s.endpoint }
func (s stubBackend) DefaultEndpoint() bool { return true }
func (s stubBackend) Remove(_ context.Context, _ backend.Kind, _ string, names []string) []error {
	return make([]error, len(names))
}
func (s stubBackend) Watchdog(string) (backend.WatchdogPlan, error) {
	return backend.WatchdogPlan{}, errors.New("stub: no watchdog")
}

// self is this process's identity.
func self(t testing.TB) ledger.Identity {
	t.Helper()
	me, err := ledger.Self()
	if err != nil {
		t.Fatal(err)
	}
	return me
}

var (
	deadOnce sync.Once
	deadID   ledger.Identity
	deadErr  error
)

// deadProcess is the identity of a process of this boot that has exited
// (and been waited for): no process has its pid any more, and were the pid
// reused, the start recorded would not match.
func deadProcess(t testing.TB) ledger.Identity {
	t.Helper()
	deadOnce.Do(func() {
		cmd := sleeperCommand()
		if deadErr = cmd.Start(); deadErr != nil {
			return
		}
		id, ok, err := ledger.Lookup(cmd.Process.Pid)
		cmd.Process.Kill()
		cmd.Wait()
		switch {
		case err != nil:
			deadErr = err
		case !ok:
			deadErr = errors.New("the child vanished before it was looked up")
		default:
			deadID = id
		}
	})
	if deadErr != nil {
		t.Fatal(deadErr)
	}
	return deadID
}

// envSleeper makes this test binary, re-run, a process that only waits:
// `sleep` is no program of Windows.
const envSleeper = "RZ_TEST_SLEEPER"

// sleeperCommand is a process that waits until it is killed: this test
// binary re-run into TestSleeperHelper.
func sleeperCommand() *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestSleeperHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), envSleeper+"=1")
	return cmd
}

func TestSleeperHelper(t *testing.T) {
	if os.Getenv(envSleeper) != "1" {
		t.Skip("the helper process that only waits")
	}
	time.Sleep(time.Hour)
}

// recordOf is the record rightsize-go writes for a process.
func recordOf(id ledger.Identity, backendName, endpoint string) ledger.Record {
	return ledger.Record{
		PID: id.PID, StartedISO: ledger.FormatISO(id.Start), Backend: backendName,
		StartTicks: id.StartTicks, BootID: id.BootID, PidNamespace: id.PidNamespace,
		Endpoint: endpoint, Writer: "go",
	}
}

// writeRun writes a run's files into runs: the record as given (nil: none),
// and a line file per non-nil list.
func writeRun(t testing.TB, runs, id string, record []byte, sandboxes, networks []string) {
	t.Helper()
	rec, sbx, nets := ledger.Paths(runs, id)
	if record != nil {
		must(t, os.WriteFile(rec, record, 0o600))
	}
	for _, f := range []struct {
		path  string
		names []string
	}{{sbx, sandboxes}, {nets, networks}} {
		if f.names != nil {
			must(t, os.WriteFile(f.path, []byte(lines(f.names)), 0o600))
		}
	}
}

func lines(names []string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n + "\n")
	}
	return b.String()
}

// runsDir creates cache/runs as the ledger would.
func runsDir(t testing.TB, cache string) string {
	t.Helper()
	dir, err := ledger.EnsureSubdir(cache, ledger.RunsDir)
	must(t, err)
	return dir
}

// listDir returns the names in dir, sorted.
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	must(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// snapshot reads every file of dir, symbolic links as their target, with
// its modification time: equal snapshots mean nothing was touched.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range listDir(t, dir) {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		must(t, err)
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			must(t, err)
			out[name] = "-> " + target
			continue
		}
		b, err := os.ReadFile(p)
		must(t, err)
		out[name] = fi.Mode().String() + " " + fi.ModTime().Format(time.RFC3339Nano) + " " + string(b)
	}
	return out
}

// withoutCopy is names, a listing of runs, without Go's copy of another
// member's record that a sweep leaving the run alone keeps
// (ledger.RunFiles.Remember), once checked to be one: the very file of the
// family record, or its bytes.
func withoutCopy(t testing.TB, runs string, names []string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		id, ok := strings.CutSuffix(n, ledger.OwnRecordExt)
		if !ok || !slices.Contains(names, id+ledger.RecordExt) {
			out = append(out, n)
			continue
		}
		own, err1 := os.ReadFile(filepath.Join(runs, n))
		fam, err2 := os.ReadFile(filepath.Join(runs, id+ledger.RecordExt))
		if err1 != nil || err2 != nil || string(own) != string(fam) || strings.Contains(string(fam), `"writer":"go"`) {
			t.Errorf("%s is not a copy of another member's record %s (%v, %v)", n, id+ledger.RecordExt, err1, err2)
			out = append(out, n)
		}
	}
	return out
}

// snapshotWithoutCopy is snapshot without Go's copies of other members'
// records (withoutCopy).
func snapshotWithoutCopy(t testing.TB, dir string) map[string]string {
	t.Helper()
	snap := snapshot(t, dir)
	var names []string
	for n := range snap {
		names = append(names, n)
	}
	sort.Strings(names)
	keep := withoutCopy(t, dir, names)
	for _, n := range names {
		if !slices.Contains(keep, n) {
			delete(snap, n)
		}
	}
	return snap
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
