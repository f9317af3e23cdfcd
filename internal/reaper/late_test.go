package reaper_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// own. Nothing else: see spared.
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
	// Runs the late look must spare, each with a network on the engine
	// carrying its label.
	fateOf := func(run string, owner ledger.Record, backendName string, written time.Time, outcome ledger.Outcome) {
		t.Helper()
		_, err := ledger.WriteFate(cache, ledger.Fate{
			Run: run, By: reaper.BySweep,
			Owner: ledger.FateOwner{PID: owner.PID, StartedISO: owner.StartedISO, StartTicks: owner.StartTicks, BootID: owner.BootID, PidNamespace: owner.PidNamespace, Backend: backendName},
			Items: []ledger.FateItem{{Kind: "network", Name: "rz-net-" + run[:6] + "1", Outcome: outcome}},
		}, written)
		must(t, err)
	}
	me := recordOf(self(t), d.Name(), d.Endpoint())
	spared := map[string]func(run string){
		"its fate is older than the horizon": func(run string) {
			fateOf(run, dead, d.Name(), time.Now().Add(-reaper.LateHorizon-time.Minute), ledger.AlreadyGone)
		},
		"its owner is alive": func(run string) { fateOf(run, me, d.Name(), time.Now(), ledger.AlreadyGone) },
		"its owner cannot be judged": func(run string) {
			fateOf(run, ledger.Record{}, d.Name(), time.Now(), ledger.AlreadyGone)
		},
		"its watchdog is at work": func(run string) {
			fateOf(run, dead, d.Name(), time.Now(), ledger.AlreadyGone)
			must(t, ledger.WriteWatchdogMark(cache, run, os.Getpid()))
		},
		"its files are back in the ledger": func(run string) {
			fateOf(run, dead, d.Name(), time.Now(), ledger.AlreadyGone)
			live, err := json.Marshal(me)
			must(t, err)
			writeRun(t, runs, run, live, nil, []string{"rz-net-" + run[:6] + "1"})
		},
		"its fate found nothing gone":    func(run string) { fateOf(run, dead, d.Name(), time.Now(), ledger.Removed) },
		"its fate is of another backend": func(run string) { fateOf(run, dead, "msb", time.Now(), ledger.AlreadyGone) },
		"it has no fate":                 func(string) {},
	}
	sparedRuns := map[string]string{}
	for why, prepare := range spared {
		r := randHex(t, 8)
		sparedRuns[r] = why
		prepare(r)
		_, err := d.CreateNetwork(ctx, "rz-net-"+r[:6]+"1", r)
		must(t, err)
	}
	// A dry run removes nothing.
	_, err = reaper.Sweep(ctx, d, reaper.WithCacheDir(cache), reaper.DryRun())
	must(t, err)
	if ids, err := d.(backend.RunLister).ListRun(ctx, backend.NetworkKind, run); err != nil || len(ids) != 1 {
		t.Fatalf("a dry run: the late network %v %v, want it still there", ids, err)
	}

	rep, err = reaper.Sweep(ctx, d, reaper.WithCacheDir(cache))
	must(t, err)
	if len(rep.Late) != 1 || rep.Late[0].ID != run || len(rep.Late[0].Removed) != 2 || !rep.Acted() || !rep.Clean() {
		t.Errorf("the sweep's report of the late removal: %+v", rep.Late)
	}
	var out strings.Builder
	rep.WriteTo(&out)
	if !strings.Contains(out.String(), "made after their runs were reaped") || !strings.Contains(out.String(), run) {
		t.Errorf("the sweep's printed report does not tell the late removal:\n%s", out.String())
	}
	lister := d.(backend.RunLister)
	for _, k := range []backend.Kind{backend.SandboxKind, backend.NetworkKind} {
		if ids, err := lister.ListRun(ctx, k, run); err != nil || len(ids) > 0 {
			t.Errorf("the run's %s made late is still on the engine: %v %v", k, ids, err)
		}
	}
	for r, why := range sparedRuns {
		if ids, err := lister.ListRun(ctx, backend.NetworkKind, r); err != nil || len(ids) != 1 {
			t.Errorf("a run whose %s: its network %v %v, want it left alone", why, ids, err)
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
	if line := reaper.FateLine(late); !strings.Contains(line, "was reaped; then the engine made") || strings.Contains(line, "died") {
		t.Errorf("the late fate's line tells another death: %q", line)
	}

	// Nothing more to find: no further fate.
	rep, err = reaper.Sweep(ctx, d, reaper.WithCacheDir(cache))
	must(t, err)
	if len(rep.Late) != 0 {
		t.Errorf("a sweep that found nothing late reports %+v", rep.Late)
	}
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

// The same create, with the run's watchdog, not a sweep, reaping it: the
// owner died with a network's create in flight (listed, never told: no id
// came), and the engine made it after the watchdog's look by label. The
// watchdog asks for the listed name, tells it already gone in the run's
// fate, and the next sweep removes what the engine made late. (Seen in a
// chaos run on Docker with faults: a loaded engine made a network 3 s
// after its owner's death; the watchdog's fate told nothing and deleted
// the run's files, and the network stayed.)
func TestWatchdogTellsAnUnansweredCreate(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "engine")
	t.Setenv(memory.EnvDir, dir)
	t.Setenv("RIGHTSIZE_WATCHDOG_SETTLE", "0")
	d, err := memory.Open(dir)
	must(t, err)
	cache := t.TempDir()
	runs := runsDir(t, cache)
	dead := deadProcess(t)
	rec, err := json.Marshal(recordOf(dead, d.Name(), d.Endpoint()))
	must(t, err)

	run := randHex(t, 8)
	sbx, net := "rz-"+run+"-1", "rz-net-"+run[:6]+"1"
	made, err := d.Create(ctx, sbx, backend.Spec{Image: "busybox", RunID: run})
	must(t, err)
	writeRun(t, runs, run, rec, []string{sbx}, []string{net})
	must(t, ledger.WriteOwnerStub(cache, run, ledger.FateOwner{
		PID: dead.PID, StartedISO: ledger.FormatISO(dead.Start), StartTicks: dead.StartTicks,
		BootID: dead.BootID, PidNamespace: dead.PidNamespace, Backend: d.Name(),
	}))
	told := "+s " + made.ID() + " " + sbx + "\n"
	if code := reaper.RunScriptWatchdog(strings.NewReader(told), runs, run, backend.Memory, ""); code != 0 {
		t.Fatalf("the watchdog exited %d", code)
	}
	if ledger.HasFiles(runs, run) {
		t.Fatalf("the run's files stay: %q", listDir(t, runs))
	}
	fates := fatesOf(t, cache, run)
	if len(fates) != 1 {
		t.Fatalf("the run's fates: %d, want the watchdog's", len(fates))
	}
	var got []string
	for _, it := range fates[0].Items {
		got = append(got, it.Kind+" "+it.Name+" "+string(it.Outcome))
	}
	slices.Sort(got)
	if want := []string{"network " + net + " " + string(ledger.AlreadyGone), "sandbox " + sbx + " " + string(ledger.Removed)}; !slices.Equal(got, want) {
		t.Fatalf("the watchdog's fate tells %q, want %q", got, want)
	}

	// The engine answers the create now.
	_, err = d.CreateNetwork(ctx, net, run)
	must(t, err)
	rep, err := reaper.Sweep(ctx, d, reaper.WithCacheDir(cache))
	must(t, err)
	if len(rep.Late) != 1 || rep.Late[0].ID != run {
		t.Errorf("the sweep's late removals: %+v, want the run's network", rep.Late)
	}
	if ids, err := d.(backend.RunLister).ListRun(ctx, backend.NetworkKind, run); err != nil || len(ids) > 0 {
		t.Errorf("the network made after the watchdog's look is still on the engine: %v %v", ids, err)
	}
}
