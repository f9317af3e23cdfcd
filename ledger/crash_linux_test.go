package ledger_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/ledger"
)

// envCrashHelper switches the test binary into the crash helper: the cache
// dir to run in.
const envCrashHelper = "RIGHTSIZE_LEDGER_TEST_CRASH_CACHE"

// TestCrashHelper is not a test: TestCrashConsistency re-executes the test
// binary into it. It adds and removes names for ever, reporting on stdout
// "+name" once AddSandbox/AddNetwork returned and "-name" before it calls
// RemoveSandbox/RemoveNetwork, so that at any instant every name reported
// live and not reported leaving must be in the files.
func TestCrashHelper(t *testing.T) {
	cache := os.Getenv(envCrashHelper)
	if cache == "" {
		t.Skip("helper process for TestCrashConsistency only")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		os.Exit(3)
	}
	r, err := ledger.NewRun(cache, crashOwner)
	if err != nil {
		fail(err)
	}
	// One write per report: a pipe write this small is atomic, so a kill
	// cannot leave half a line.
	report := func(s string) {
		if _, err := os.Stdout.WriteString(s + "\n"); err != nil {
			fail(err)
		}
	}
	proctest.Say("ready", r.ID())
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	var sandboxes, networks []string
	for i := 0; ; i++ {
		if len(sandboxes) == 0 || len(sandboxes) < 4 && rng.IntN(2) == 0 {
			name := fmt.Sprintf("rz-%s-%d", r.ID(), i)
			if err := r.Add(ledger.SandboxKind, name); err != nil {
				fail(err)
			}
			report("+" + name)
			sandboxes = append(sandboxes, name)
		} else {
			j := rng.IntN(len(sandboxes))
			name := sandboxes[j]
			report("-" + name)
			if err := r.Remove(ledger.SandboxKind, name); err != nil {
				fail(err)
			}
			sandboxes = slices.Delete(sandboxes, j, j+1)
		}
		switch n := rng.IntN(8); {
		case n == 0 && len(networks) < 2:
			name := fmt.Sprintf("rz-net-%08x", i)
			if err := r.Add(ledger.NetworkKind, name); err != nil {
				fail(err)
			}
			report("+" + name)
			networks = append(networks, name)
		case n == 1 && len(networks) > 0:
			name := networks[0]
			report("-" + name)
			if err := r.Remove(ledger.NetworkKind, name); err != nil {
				fail(err)
			}
			networks = networks[1:]
		}
	}
}

// crashOwner is the helper's run's owner: the family's record is written
// too, where the other members may judge it (ledger.FamilyJudges).
var crashOwner = ledger.Owner{Backend: "docker", Endpoint: "unix:///var/run/docker.sock", DefaultEngine: true}

func startCrashHelper(t *testing.T, cache string) *proctest.Helper {
	t.Helper()
	return proctest.StartHelper(t, proctest.Spec{
		Name: "crash helper",
		Argv: proctest.TestArgv("TestCrashHelper"),
		Env:  proctest.Environ(nil, envCrashHelper+"="+cache),
	})
}

// liveNames replays the helper's reports: the names reported added and not yet
// reported leaving.
func liveNames(reports []string) map[string]bool {
	live := map[string]bool{}
	for _, r := range reports {
		switch r[0] {
		case '+':
			live[r[1:]] = true
		case '-':
			delete(live, r[1:])
		}
	}
	return live
}

func TestCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("100 SIGKILLed helper processes")
	}
	const kills = 100
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	started := time.Now()
	var ops, pruned, tempLeft int
	for k := range kills {
		cache := filepath.Join(t.TempDir(), "cache")
		c := startCrashHelper(t, cache)
		id, err := c.Get("ready", 20*time.Second)
		if err != nil {
			t.Fatalf("kill %d: %v", k, err)
		}
		// A random moment in the helper's loop, not a synchronisation.
		time.Sleep(time.Duration(1000+rng.IntN(49_000)) * time.Microsecond)
		if err := c.Kill(); err != nil {
			t.Fatal(err)
		}
		// Ended: stdout closed, every report written before the kill is in.
		if !c.Wait(time.Minute) {
			t.Fatalf("kill %d: the helper did not end within a minute of SIGKILL", k)
		}
		if sig, ok := c.Signaled(); !ok || sig != syscall.SIGKILL {
			t.Fatalf("kill %d: helper ended by itself (%s), not by SIGKILL:\n%s", k, c.Status(), c.Stderr())
		}
		reports := c.Lines()
		live := liveNames(reports)
		ops += len(reports)

		runs := filepath.Join(cache, ledger.RunsDir)
		rec, sbxPath, netsPath := ledger.Paths(runs, id)
		own := ledger.OwnRecordPath(runs, id)
		entries, err := os.ReadDir(runs)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := filepath.Join(runs, e.Name())
			switch {
			case strings.HasPrefix(e.Name(), "."):
				tempLeft++ // a temporary file the kill interrupted: never read
			case p == rec || p == own:
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				r, err := ledger.ParseRecord(b)
				if err != nil {
					t.Errorf("kill %d: record does not parse: %v\n%q", k, err, b)
				} else if r.PID != c.Pid() {
					t.Errorf("kill %d: record names pid %d, the helper was %d", k, r.PID, c.Pid())
				}
			case p == sbxPath || p == netsPath:
				names, rejected, err := readLines3(p)
				if err != nil || len(rejected) != 0 {
					t.Errorf("kill %d: %s: rejected %v, err %v", k, e.Name(), rejected, err)
				}
				seen := map[string]bool{}
				for _, n := range names {
					if seen[n] {
						t.Errorf("kill %d: %s lists %q twice", k, e.Name(), n)
					}
					seen[n] = true
				}
			default:
				t.Errorf("kill %d: unexpected file %s in runs/", k, e.Name())
			}
		}
		sbx, _, _ := readLines3(sbxPath)
		nets, _, _ := readLines3(netsPath)
		if (len(sbx) > 0 || len(nets) > 0) && (!exists(t, own) || ledger.FamilyJudges(crashOwner) && !exists(t, rec)) {
			t.Errorf("kill %d: line files without both records: the records are written before the first line and removed after the last", k)
		}
		if len(sbx) == 0 && len(nets) == 0 {
			pruned++
		}
		onDisk := map[string]bool{}
		for _, n := range append(sbx, nets...) {
			onDisk[n] = true
		}
		for n := range live {
			if !onDisk[n] {
				t.Errorf("kill %d: %q was reported live but is not in the ledger: a sandbox the sweep could never reap", k, n)
			}
		}
		rf, err := ledger.ReadRun(cache, id)
		// A run killed before its record's rename may be only temporary
		// files; with lines, it must have a readable record.
		if err == nil && rf.RecordErr != nil && (rf.Has(ledger.SandboxKind) || rf.Has(ledger.NetworkKind) || !errors.Is(rf.RecordErr, ledger.ErrNoRecord)) {
			t.Errorf("kill %d: ListRuns: %v", k, rf.RecordErr)
		}
		// The sweep's clean-up of a dead run leaves none of its files; the
		// temporary files the kill interrupted are never read, and are
		// the sweep's housekeeping's once an hour old (Scan.Temps).
		if err == nil {
			if err := rf.RemoveFiles(); err != nil {
				t.Errorf("kill %d: RemoveFiles: %v", k, err)
			}
		}
		scan, err := ledger.ScanRuns(cache)
		if err != nil {
			t.Fatal(err)
		}
		left, _ := os.ReadDir(runs)
		if scan.Len() != 0 || len(left) != len(scan.Temps()) {
			t.Errorf("kill %d: after RemoveFiles %d runs and %d files are left, %d of them temporary", k, scan.Len(), len(left), len(scan.Temps()))
		}
		for _, tmp := range scan.Temps() {
			os.Remove(filepath.Join(runs, tmp))
		}
		if t.Failed() {
			t.Fatalf("kill %d: stopping at the first inconsistent ledger (reports: %d, live %d, on disk %q)", k, len(reports), len(live), slices.Sorted(maps.Keys(onDisk)))
		}
	}
	if ops == 0 {
		t.Fatal("the helpers never reported an operation: the kills tested nothing")
	}
	t.Logf("%d kills in %v: %d reported operations, %d ledgers found empty, %d temporary files left by kills", kills, time.Since(started).Round(time.Millisecond), ops, pruned, tempLeft)
}
