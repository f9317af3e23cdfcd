package reaper_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// A sweep goes through runs in the order their files lie on disk, yet its
// report holds the runs with the lowest ids, in id order: the same runs a
// sweep in id order would hold.
func TestSweepReportHoldsLowestIDs(t *testing.T) {
	const n = 1500
	cache := t.TempDir()
	runs := runsDir(t, cache)
	rec := deadRecordFor(t)
	var ids []string
	for i := range n {
		// Written in an order unlike that of the ids.
		id := fmt.Sprintf("%08x", (i*7919)%n)
		ids = append(ids, id)
		must(t, os.WriteFile(ledger.RecordPath(runs, id), rec, 0o600))
	}
	rep, err := reaper.Sweep(context.Background(), newFake(nil), reaper.WithCacheDir(cache))
	must(t, err)
	if rep.Seen != n || rep.Count(reaper.Reaped) != n || len(rep.Runs) != 1000 || rep.Omitted != n-1000 {
		t.Fatalf("Seen %d, reaped %d, held %d, omitted %d; want %d, %d, 1000, %d", rep.Seen, rep.Count(reaper.Reaped), len(rep.Runs), rep.Omitted, n, n, n-1000)
	}
	slices.Sort(ids)
	for i, rr := range rep.Runs {
		if rr.ID != ids[i] {
			t.Fatalf("Runs[%d] is run %s, want %s: the lowest ids, in order", i, rr.ID, ids[i])
		}
		if rr.Decision != reaper.Reaped {
			t.Errorf("run %s: %s (%s)", rr.ID, rr.Decision, rr.Reason)
		}
	}
}
