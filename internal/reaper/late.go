package reaper

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
)

// LateHorizon is how long after a run's fate a sweep still looks for
// what was made of it late.
//
// A test asks the engine for a sandbox or a network once its name is in
// the run's list, and may die with the request in flight. A reaper that
// comes before the engine has answered finds the name on no engine (it
// is told "already gone"), looks by the run's label, finds nothing, and
// deletes the run's files; then the engine makes what it was asked, with
// the run's label, and no later sweep has a reason to look for the run.
// A slow engine (a latency of 750 ms, in the chaos runs) is enough. So
// every sweep looks again, by label, for the runs whose fate was written
// within the horizon and told a listed name already gone, and removes
// what it finds, with a fate of its own (NoteLate).
const LateHorizon = 2 * time.Minute

// NoteLate is the note on what a sweep found, by its run's label, after
// the run had been reaped: made by a create the engine answered late.
const NoteLate = "made after its run was reaped: a create the engine answered late"

// sweepLate removes, for each run reaped within LateHorizon whose fate
// told a listed sandbox or network already gone, what the engine now
// shows carrying the run's label (keep-alives aside, as ListRun leaves
// them). A run whose files are back in the ledger, whose owner the fate
// names and is alive, or whose watchdog is still at work, is left alone.
func (c *config) sweepLate(ctx context.Context, b backend.Backend) {
	lister, ok := b.(backend.RunLister)
	if !ok || c.dryRun || c.only != "" {
		return
	}
	fates, err := ledger.ReadFatesSince(c.cache, c.now().Add(-LateHorizon))
	if err != nil {
		return
	}
	type late struct {
		kinds []names.Kind
		owner ledger.FateOwner
	}
	runs := map[string]*late{}
	var order []string
	for _, f := range fates {
		if f.Err != nil || f.Run == c.own || f.Owner.Backend != "" && names.CanonicalBackend(f.Owner.Backend) != names.CanonicalBackend(b.Name()) {
			continue
		}
		for _, it := range f.Items {
			i := slices.IndexFunc(lateKinds, func(k names.Kind) bool { return fateKind(k) == it.Kind })
			if i < 0 || it.Outcome != ledger.AlreadyGone {
				continue
			}
			k := lateKinds[i]
			l := runs[f.Run]
			if l == nil {
				l = &late{owner: f.Owner}
				runs[f.Run] = l
				order = append(order, f.Run)
			}
			if !slices.Contains(l.kinds, k) {
				l.kinds = append(l.kinds, k)
			}
		}
	}
	runsDir := filepath.Join(c.cache, ledger.RunsDir)
	for _, run := range order {
		l := runs[run]
		if ctx.Err() != nil {
			return
		}
		if ledger.HasFiles(runsDir, run) || ledger.LiveWatchdog(c.cache, run) != 0 ||
			l.owner.PID != 0 && ledger.Judge(ledger.Record{PID: l.owner.PID, StartedISO: l.owner.StartedISO}).State == ledger.Alive {
			continue
		}
		noticed := c.now()
		r := &reaped{}
		t := target{run: run}
		for _, k := range l.kinds {
			ids, err := lister.ListRun(ctx, k, run)
			if err != nil || len(ids) == 0 {
				continue // a later sweep within the horizon asks again
			}
			r.removeIDs(ctx, lister, t, k, ids, NoteLate, true)
		}
		if len(r.items) == 0 {
			continue
		}
		// Another event than the run's death: a fate of its own.
		f := ledger.Fate{
			Run: run, By: c.fateBy, ByPID: os.Getpid(), Owner: l.owner, Note: NoteLate,
			NoticedISO: ledger.FormatISO(noticed), FinishedISO: ledger.FormatISO(c.now()),
		}
		if f.By == "" {
			f.By = BySweep
		}
		for _, it := range r.items {
			f.Items = append(f.Items, fateItem(it, ledger.Origins{}))
		}
		if _, err := ledger.WriteFate(c.cache, f, c.now()); err != nil && c.logger != nil {
			c.logger.Warn("fate not written", "run", run, "err", err)
		}
		rr := RunReport{ID: run, Decision: Reaped, Reason: NoteLate}
		fileItems(&rr, r.items)
		c.log(rr)
	}
}

// lateKinds are the kinds a create in flight at its owner's death can
// leave: a volume or an image is built or made through GuardAll, whose
// lines the watchdog is told before the engine is asked, and removed by
// its name or mark, not by a look at the run's label alone.
var lateKinds = []names.Kind{names.SandboxKind, names.NetworkKind}
