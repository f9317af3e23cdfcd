package reaper_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/memory"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// A create the engine answers after the run was reaped (its owner died
// with the request in flight, the engine was slow) leaves something with
// the run's label and no file that names the run: the next sweep within
// reaper.LateHorizon of the run's fate removes it, with a fate of its
// own. Not a run reaped longer ago, nor one whose owner is alive, nor
// what carries another run's label.
func TestSweepRemovesLateCreates(t *testing.T) {
	ctx := context.Background()
	d, err := memory.Open(filepath.Join(t.TempDir(), "engine"))
	must(t, err)
	cache := t.TempDir()
	runs := runsDir(t, cache)
	dead := recordOf(deadProcess(t), d.Name(), d.Endpoint())
	rec, err := json.Marshal(dead)
	must(t, err)

	run := randHex(t, 8)
	sbx, net := "rz-"+run+"-1", "rz-net-"+run[:6]+"1"
	writeRun(t, runs, run, rec, []string{sbx}, []string{net})
	rep, err := reaper.Sweep(ctx, d, reaper.WithCacheDir(cache))
	must(t, err)
	if got := decisionOf(rep, run); got != reaper.Reaped {
		t.Fatalf("the dead run whose names are on no engine: %q, want reaped", got)
	}
	first := fatesOf(t, cache, run)
	if len(first) != 1 || !slices.ContainsFunc(first[0].Items, func(it ledger.FateItem) bool { return it.Outcome == ledger.AlreadyGone }) {
		t.Fatalf("the run's fate, want one that tells its names already gone: %+v", first)
	}

	// The engine answers the creates now.
	_, err = d.Create(ctx, sbx, backend.Spec{Image: "busybox", RunID: run})
	must(t, err)
	_, err = d.CreateNetwork(ctx, net, run)
	must(t, err)
	// Runs the horizon spares: a fate older than it, and a fate whose
	// owner is this live process; and a run with no fate at all.
	old, alive, other := randHex(t, 8), randHex(t, 8), randHex(t, 8)
	for _, r := range []struct {
		run     string
		owner   ledger.Record
		written time.Time
	}{
		{old, dead, time.Now().Add(-reaper.LateHorizon - time.Minute)},
		{alive, recordOf(self(t), d.Name(), d.Endpoint()), time.Now()},
	} {
		_, err := ledger.WriteFate(cache, ledger.Fate{
			Run: r.run, By: reaper.BySweep, Owner: ledger.FateOwner{PID: r.owner.PID, StartedISO: r.owner.StartedISO, Backend: d.Name()},
			Items: []ledger.FateItem{{Kind: "network", Name: "rz-net-" + r.run[:6] + "1", Outcome: ledger.AlreadyGone}},
		}, r.written)
		must(t, err)
	}
	for _, r := range []string{old, alive, other} {
		_, err := d.CreateNetwork(ctx, "rz-net-"+r[:6]+"1", r)
		must(t, err)
	}

	_, err = reaper.Sweep(ctx, d, reaper.WithCacheDir(cache))
	must(t, err)
	lister := d.(backend.RunLister)
	for _, k := range []backend.Kind{backend.SandboxKind, backend.NetworkKind} {
		if ids, err := lister.ListRun(ctx, k, run); err != nil || len(ids) > 0 {
			t.Errorf("the run's %s made late is still on the engine: %v %v", k, ids, err)
		}
	}
	for _, r := range []string{old, alive, other} {
		if ids, err := lister.ListRun(ctx, backend.NetworkKind, r); err != nil || len(ids) != 1 {
			t.Errorf("network of run %s: %v %v, want it left alone", r, ids, err)
		}
	}
	fates := fatesOf(t, cache, run)
	if len(fates) != 2 {
		t.Fatalf("fates of the run: %d, want its death's and the late removal's", len(fates))
	}
	late := fates[0] // newest first
	if late.Note != reaper.NoteLate || len(late.Items) != 2 {
		t.Fatalf("the late removal's fate: %+v", late.Fate)
	}
	for _, it := range late.Items {
		if it.Outcome != ledger.Removed || it.Note != reaper.NoteLate {
			t.Errorf("late item %+v, want removed with the note %q", it, reaper.NoteLate)
		}
	}

	// Nothing more to find: no further fate.
	_, err = reaper.Sweep(ctx, d, reaper.WithCacheDir(cache))
	must(t, err)
	if n := len(fatesOf(t, cache, run)); n != 2 {
		t.Errorf("a sweep that found nothing late wrote a fate: %d fates", n)
	}
}

// fatesOf are run's fates in cache, newest first.
func fatesOf(t *testing.T, cache, run string) []ledger.FateFile {
	t.Helper()
	all, err := ledger.ReadFates(cache)
	must(t, err)
	return slices.DeleteFunc(all, func(f ledger.FateFile) bool { return f.Run != run })
}

// decisionOf is what rep decided about run.
func decisionOf(rep *reaper.Report, run string) reaper.Decision {
	for _, rr := range rep.Runs {
		if rr.ID == run {
			return rr.Decision
		}
	}
	return ""
}
