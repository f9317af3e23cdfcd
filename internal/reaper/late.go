package reaper

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
)

// LateHorizon is how long after a fate of a run (a sweep's or its
// watchdog's) a sweep still looks for what was made of it late.
//
// A test asks the engine for a sandbox or a network once its name is in
// the run's list, and may die with the request in flight. A sweep (or
// the run's watchdog, for the names it was never told) that comes before
// the engine has answered finds the name on no engine (it is told
// "already gone"), looks by the run's label, finds nothing, and deletes
// the run's files; then the engine makes what it was asked, with the
// run's label, and no later sweep has a reason to look for the run. A
// slow engine (a latency of 750 ms, in the chaos runs; a loaded one 3 s
// after a watchdog's look, in another) is enough. So
// every sweep looks again, by label, for the runs whose fate was written
// within the horizon and told a listed name already gone, and removes
// what it finds, with a fate of its own (NoteLate).
const LateHorizon = 2 * time.Minute

// NoteLate is the note on what a sweep found, by its run's label, after
// the run had been reaped: made by a create the engine answered late.
const NoteLate = "made after its run was reaped: a create the engine answered late"

// lateKinds are the kinds a create in flight at its owner's death can
// leave, in the order they are removed (a network after the sandboxes
// that may be attached to it). A volume or an image (GuardAll) is told to
// the watchdog and listed before the engine is asked, and removed by its
// name or mark, never by a look at the run's label alone.
var lateKinds = []names.Kind{names.SandboxKind, names.NetworkKind}

// sweepLate removes, for each run a fate written within LateHorizon told
// a listed sandbox or network of already gone, what the engine now shows
// carrying the run's label (keep-alives aside, as ListRun leaves them).
// A run is looked at only when the owner the fate names is proven dead
// (an owner that cannot be judged from here is left alone), no file of
// the run is back in the ledger, no watchdog of it is at work, and no
// other process holds its claim (two sweeps at once: one looks). A
// fate is written, and the run reported in rep.Late, when something was
// removed, or kept for the first time (a kept one keeps the run in the
// window: its fate is newer).
func (c *config) sweepLate(ctx context.Context, b backend.Backend, rep *Report) {
	lister, ok := b.(backend.RunLister)
	if !ok || c.dryRun || c.only != "" {
		return
	}
	fates, err := ledger.ReadFatesSince(c.cache, c.now().Add(-LateHorizon))
	if err != nil {
		return
	}
	type late struct {
		kinds    [len(names.Kinds)]bool
		owner    ledger.FateOwner
		toldKept bool // a late fate of the run already told something kept
	}
	runs := map[string]*late{}
	var order []string
	for _, f := range fates { // newest first
		if f.Err != nil || f.Run == c.own || f.Owner.Backend != "" && names.CanonicalBackend(f.Owner.Backend) != names.CanonicalBackend(b.Name()) {
			continue
		}
		l := runs[f.Run]
		for _, it := range f.Items {
			i := slices.IndexFunc(lateKinds, func(k names.Kind) bool { return fateKind(k) == it.Kind })
			lateKept := f.Note == NoteLate && it.Outcome == ledger.Kept
			if i < 0 || it.Outcome != ledger.AlreadyGone && !lateKept {
				continue
			}
			if l == nil {
				l = &late{owner: f.Owner}
				runs[f.Run] = l
				order = append(order, f.Run)
			}
			l.kinds[lateKinds[i]] = true
			l.toldKept = l.toldKept || lateKept
		}
	}
	runsDir := filepath.Join(c.cache, ledger.RunsDir)
	for _, run := range order {
		if ctx.Err() != nil {
			return
		}
		l := runs[run]
		if !c.provenDead(l.owner) || ledger.HasFiles(runsDir, run) || ledger.LiveWatchdog(c.cache, run) != 0 {
			continue
		}
		release, _, _ := claim(filepath.Join(runsDir, run+ledger.LockExt))
		if release == nil {
			continue // another process is at it
		}
		noticed := c.now()
		r := c.removeLate(ctx, lister, run, l.kinds)
		release()
		if r.hung {
			return // the engine stopped answering: a later sweep asks again
		}
		removed := slices.ContainsFunc(r.items, func(it Item) bool { return it.Outcome == ledger.Removed })
		if !removed && (len(r.items) == 0 || l.toldKept) {
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
		rr := RunReport{ID: run, Decision: Reaped, Reason: NoteLate, Took: c.now().Sub(noticed)}
		fileItems(&rr, r.items)
		c.log(rr)
		rep.Late = append(rep.Late, rr)
	}
}

// removeLate removes what the engine shows of kinds carrying run's label,
// sandboxes first; a network refused as in use right after its run's
// sandboxes went is asked again, as a reaping does (endpointsMayGo).
func (c *config) removeLate(ctx context.Context, lister backend.RunLister, run string, kinds [len(names.Kinds)]bool) *reaped {
	r := &reaped{}
	t := target{run: run, giveUp: true}
	for _, k := range lateKinds {
		if !kinds[k] || r.hung {
			continue
		}
		ids, err := lister.ListRun(ctx, k, run)
		if err != nil {
			r.hung = errors.Is(err, backend.ErrUnreachable)
			continue // a later sweep within the horizon asks again
		}
		start := time.Now()
		for pass := 0; len(ids) > 0 && !r.hung; pass++ {
			pauseCtx(ctx, endpointPause(pass))
			ids = r.removeIDs(ctx, lister, t, k, ids, NoteLate, true)
			if k != names.NetworkKind || !(pass == 0 || endpointsMayGo(ctx, pass, start, r.sandboxesRemoved())) {
				break
			}
		}
	}
	return r
}

// provenDead reports whether the owner a fate names is dead, judged as
// its record was: an owner that cannot be judged from here (no pid, a
// pid namespace this process cannot look into) is not.
func (c *config) provenDead(o ledger.FateOwner) bool {
	if o.PID == 0 {
		return false
	}
	rec := ledger.Record{PID: o.PID, StartedISO: o.StartedISO, StartTicks: o.StartTicks, BootID: o.BootID, PidNamespace: o.PidNamespace, Backend: o.Backend, Writer: o.Writer}
	return c.liveness(rec).State == ledger.Dead
}
