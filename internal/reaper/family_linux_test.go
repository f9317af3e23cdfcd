package reaper_test

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// The edges of the family contract where a Go sweep meets another
// member's run, on the real engine.

// runReport is the sweep's report of run id.
func runReport(t testing.TB, rep *reaper.Report, id string) reaper.RunReport {
	t.Helper()
	for _, rr := range rep.Runs {
		if rr.ID == id {
			return rr
		}
	}
	t.Fatalf("the sweep did not report run %s: %+v", id, rep.Runs)
	return reaper.RunReport{}
}

// liveProcess starts a process that outlives the test's sweep and is
// ended when the test ends.
func liveProcess(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// TestSweepKotlinUnknownStart: when the JVM cannot read its own start,
// the Kotlin member records the epoch (Liveness.kt,
// currentProcessStartedIso: `startInstant().orElse(Instant.EPOCH)`,
// rightsize-kotlin db2958f), in the bytes RunRecord.toJson writes. A
// live process with that record is alive, as Kotlin itself judges an
// unknown start: its labelled container stays through a sweep, and so do
// its files.
func TestSweepKotlinUnknownStart(t *testing.T) {
	proctest.NeedHostPidNamespace(t) // the record names no pid namespace
	drv := openDocker(t)
	if !drv.DefaultEndpoint() {
		t.Skipf("the engine these tests use (%s) is not the default one: another member's run is left alone for that reason", drv.Endpoint())
	}
	pid := liveProcess(t)
	cache := t.TempDir()
	runs := runsDir(t, cache)
	id := randHex(t, 8)
	name := uniqueName(t, "kt")
	startContainer(t, drv, name, "", id)
	rec := fmt.Sprintf(`{"pid":%d,"startedIso":"1970-01-01T00:00:00Z","backend":"docker"}`, pid)
	writeRun(t, runs, id, []byte(rec), []string{name}, nil)
	before := snapshot(t, runs)

	rep, err := reaper.Sweep(context.Background(), drv, reaper.WithCacheDir(cache))
	must(t, err)
	rr := runReport(t, rep, id)
	if rr.Decision != reaper.LeftAlone || !strings.Contains(rr.Reason, "epoch") {
		t.Errorf("run of live pid %d with the epoch as its start: %s (%s), want %s, saying its start is unknown", pid, rr.Decision, rr.Reason, reaper.LeftAlone)
	}
	if !containerExists(t, drv, name) {
		t.Errorf("the live Kotlin run's container %s was removed", name)
	}
	if after := snapshotWithoutCopy(t, runs); !maps.Equal(before, after) {
		t.Errorf("the live run's files changed:\n before %v\n after  %v", before, after)
	}
}

// TestSweepForeignRunOfAnotherEngine: the other members record no engine
// (contract §12: Kotlin follows DOCKER_HOST and Docker contexts, Node and
// Rust a unix DOCKER_HOST). A dead run of theirs of which this engine shows
// nothing — no listed name, nothing with its label — may have used
// another: "not found" here proves nothing gone, so the run is kept, its
// files as they were, for a sweep of the engine it used. When something it
// lists is here with its label, it used this engine, and the rest is truly
// gone. A person's sweep of the run drops it either way.
func TestSweepForeignRunOfAnotherEngine(t *testing.T) {
	proctest.NeedHostPidNamespace(t) // the records name no pid namespace
	drv := openDocker(t)
	if !drv.DefaultEndpoint() {
		t.Skipf("the engine these tests use (%s) is not the default one: another member's run is left alone for that reason", drv.Endpoint())
	}
	dead := deadProcess(t)
	// As rightsize-node writes it (run-record.ts serializeRunRecord,
	// rightsize-node 0b3b667): compact, three fields, milliseconds.
	nodeRecord := []byte(fmt.Sprintf(`{"pid":%d,"startedIso":%q,"backend":"docker"}`, dead.PID, ledger.FormatISO(dead.Start)))

	t.Run("nothing of it here", func(t *testing.T) {
		cache := t.TempDir()
		runs := runsDir(t, cache)
		id := randHex(t, 8)
		writeRun(t, runs, id, nodeRecord, []string{"rz-" + id + "-1", "rz-" + id + "-2"}, []string{"rz-net-" + randHex(t, 8)})
		before := snapshot(t, runs)
		for i := range 2 { // a later sweep keeps it the same way
			rep, err := reaper.Sweep(context.Background(), drv, reaper.WithCacheDir(cache))
			must(t, err)
			rr := runReport(t, rep, id)
			if rr.Decision != reaper.LeftAlone || !strings.Contains(rr.Reason, "left for a sweep of the engine it used") || !strings.Contains(rr.Reason, "--run "+id) {
				t.Errorf("sweep %d: %s (%s), want %s, left for the engine it used", i, rr.Decision, rr.Reason, reaper.LeftAlone)
			}
			if len(rr.Removed)+len(rr.Kept)+len(rr.NotOwned) != 0 || !rep.Clean() {
				t.Errorf("sweep %d: removed %v, kept %v, not owned %v, clean %v; want nothing touched, nothing kept back", i, rr.Removed, rr.Kept, rr.NotOwned, rep.Clean())
			}
			if after := snapshotWithoutCopy(t, runs); !maps.Equal(before, after) {
				t.Errorf("sweep %d changed the run's files:\n before %v\n after  %v", i, before, after)
			}
		}

		rep, err := reaper.Sweep(context.Background(), drv, reaper.WithCacheDir(cache), reaper.OnlyRun(id))
		must(t, err)
		if rr := runReport(t, rep, id); rr.Decision != reaper.Reaped {
			t.Errorf("by hand: %s (%s), want %s", rr.Decision, rr.Reason, reaper.Reaped)
		}
		if left := listDir(t, runs); len(left) != 0 {
			t.Errorf("by hand, the run's files stay: %q", left)
		}
	})

	t.Run("some of it here", func(t *testing.T) {
		cache := t.TempDir()
		runs := runsDir(t, cache)
		id := randHex(t, 8)
		here := uniqueName(t, "nd")
		startNodeContainer(t, drv, here, id) // Node's one label spelling
		writeRun(t, runs, id, nodeRecord, []string{here, "rz-" + id + "-2"}, nil)
		rep, err := reaper.Sweep(context.Background(), drv, reaper.WithCacheDir(cache))
		must(t, err)
		rr := runReport(t, rep, id)
		if rr.Decision != reaper.Reaped {
			t.Errorf("%s (%s), want %s: its container was here, so the rest is gone", rr.Decision, rr.Reason, reaper.Reaped)
		}
		if containerExists(t, drv, here) {
			t.Errorf("the run's container %s is still there", here)
		}
		if left := listDir(t, runs); len(left) != 0 {
			t.Errorf("the run's files stay: %q", left)
		}
	})
}
