package reaper_test

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/reaper"
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
	if after := snapshot(t, runs); !maps.Equal(before, after) {
		t.Errorf("the live run's files changed:\n before %v\n after  %v", before, after)
	}
}
