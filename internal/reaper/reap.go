package reaper

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/proctree"
)

// A target is what one reaping of a run removes. Every path that reaps a
// run (a sweep, the native watchdog, the run's own close) says here what
// it knows of the run and calls reapRun: the removals, the end of the
// local processes and what each outcome is are decided in one place. The
// callers differ only in what they do with the files and the fate.
type target struct {
	run string
	// told are engine ids a watchdog was told, removed by id at once, with
	// the names they were told with (for the outcome).
	told      [len(names.Kinds)][]string
	toldNames [len(names.Kinds)]map[string]string
	// listed are the names the run's lists hold, removed by name where the
	// engine shows them the run's (a network in use is asked again:
	// endpointsMayGo).
	listed [len(names.Kinds)][]string
	// byLabel: then whatever the engine shows carrying the run's label is
	// removed too (backend.RunLister), with the told ids not yet removed.
	// Unless afterKept, not when something was kept already: the lists
	// then stay as they are for a later sweep.
	byLabel, afterKept bool
	// settle is how long to wait before looking by label (a container the
	// engine was still making when its owner died).
	settle time.Duration
	// unlabelled are listed networks of a member that labels none (the
	// systemf member's), which Go reaps whole: removed by name when the
	// engine shows them made at since or later (backend.UnlabelledRemover).
	unlabelled []string
	since      time.Time
	// procs is the scope of the run's local processes to end (nil: none),
	// with grace before a SIGKILL. byHand: a person named the run, so what
	// cannot be proven is forgotten, not kept.
	procs  *proctree.Scope
	grace  time.Duration
	byHand bool
	// call bounds each call to the engine (0: ctx alone). giveUp: once the
	// engine stopped answering, make no more calls (each could wait call
	// long); a sweep, bounded by its budget, still asks for every name.
	call   time.Duration
	giveUp bool
	// judge is what a name's removal answer err makes of it; nil: outcome.
	judge func(k names.Kind, n string, err error) Item
}

// reaped is what reapRun did.
type reaped struct {
	// items are the outcomes, one per name, id or process.
	items []Item
	// kept are the listed names (and, for processes, lines) to stay listed.
	kept [len(names.Kinds)][]string
	// asIs: the look by label could not be finished, so the lists must
	// stay exactly as they are.
	asIs bool
	// here: the engine showed something of the run.
	here bool
	// hung: the engine stopped answering; later calls were not made.
	hung bool
	// procsKept: local processes were left (their lines stay).
	procsKept bool
	// procs is what the end of the local processes found.
	procs proctree.Result
	// found names, by id, what the look by label found (where it asked
	// for names: goneByName).
	found [len(names.Kinds)]map[string]string
}

// goneByName reports whether a name of kind k, asked for by name, was
// told already gone.
func (r *reaped) goneByName(k names.Kind) bool {
	return slices.ContainsFunc(r.items, func(it Item) bool {
		return it.Kind == k && it.ID == "" && it.Outcome == ledger.AlreadyGone
	})
}

// engineClean reports whether nothing of the run is known to be left on
// the engine.
func (r *reaped) engineClean() bool {
	return !r.asIs && !r.hung && !slices.ContainsFunc(r.items, func(it Item) bool {
		return it.Kind != names.ProcessKind && !it.Outcome.Gone() && it.Outcome != ledger.NotOwned
	})
}

// reapRun removes what t names and ends the run's local processes (beside
// the engine's work: their grace must not hold the first removal).
func reapRun(ctx context.Context, b backend.Backend, t target) *reaped {
	r := &reaped{}
	procs := make(chan proctree.Result, 1)
	if t.procs != nil {
		go func() { procs <- proctree.End(*t.procs, t.grace, t.byHand) }()
	}
	lister, _ := b.(backend.RunLister)
	engineKinds := backend.EngineKinds(b)
	for _, k := range names.EngineKinds {
		if !slices.Contains(engineKinds, k) { // listed by a backend that has them, swept by one that does not
			for _, n := range t.listed[k] {
				r.items = append(r.items, Item{Kind: k, Name: n, Outcome: ledger.Kept, Note: "the " + b.Name() + " backend cannot remove " + k.Plural()})
				r.kept[k] = append(r.kept[k], n)
			}
		}
	}

	// What a watchdog was told, by id, at once.
	var retry [len(names.Kinds)][]string
	if lister != nil {
		for _, k := range engineKinds {
			retry[k] = r.removeIDs(ctx, lister, t, k, t.told[k], "", false)
		}
	}
	// What the lists name.
	for _, k := range engineKinds {
		pending := t.listed[k]
		start := time.Now()
		for pass := 0; len(pending) > 0 && !r.hung; pass++ {
			pauseCtx(ctx, endpointPause(pass))
			errs := r.call(ctx, t, func(ctx context.Context) []error { return removeListed(ctx, b, t, k, pending) })
			again := k == names.NetworkKind && (pass == 0 || endpointsMayGo(ctx, pass, start, r.sandboxesRemoved()))
			var inUse []string
			for i, n := range pending {
				err := outcomeAt(errs, i)
				r.here = r.here || err == nil || errors.Is(err, backend.ErrInUse)
				if again && errors.Is(err, backend.ErrInUse) {
					inUse = append(inUse, n)
					continue
				}
				it := outcome(k, n, err)
				if t.judge != nil {
					it = t.judge(k, n, err)
				}
				r.here = r.here || it.Outcome == ledger.LeftForMember
				r.items = append(r.items, it)
				if !it.Outcome.Gone() && it.Outcome != ledger.NotOwned {
					r.kept[k] = append(r.kept[k], n)
				}
				r.hung = r.hung || t.giveUp && errors.Is(err, backend.ErrUnreachable)
			}
			pending = inUse
		}
		for _, n := range pending { // the engine stopped answering
			r.items = append(r.items, Item{Kind: k, Name: n, Outcome: ledger.Kept, Note: "the engine did not answer an earlier call"})
			r.kept[k] = append(r.kept[k], n)
		}
	}
	// Whatever carries the run's label without its list naming it (a list
	// a killed writer cut short): provably the run's, so removed too.
	kept := slices.ContainsFunc(r.kept[:], func(l []string) bool { return len(l) > 0 })
	if t.byLabel && lister != nil && (t.afterKept || !kept) {
		if t.settle > 0 && !r.hung {
			time.Sleep(t.settle)
		}
		for _, k := range engineKinds {
			if r.hung {
				r.asIs = true
				break
			}
			var ids []string
			var err error
			r.call(ctx, t, func(ctx context.Context) []error {
				if f, ok := lister.(backend.RunFinder); ok && r.goneByName(k) {
					// What it finds may be a listed name the ask by name
					// told already gone (a create the engine finished
					// since): named, its item takes that one's place.
					var found []backend.Found
					found, err = f.FindRun(ctx, k, t.run)
					r.found[k] = map[string]string{}
					for _, x := range found {
						ids = append(ids, x.ID)
						r.found[k][x.ID] = x.Name
					}
					return nil
				}
				ids, err = lister.ListRun(ctx, k, t.run)
				return nil
			})
			if err != nil {
				r.items = append(r.items, Item{Kind: k, Name: "(whatever carries the run's label)", Outcome: ledger.Kept, Note: err.Error()})
				r.asIs = true
				r.hung = r.hung || t.giveUp && errors.Is(err, backend.ErrUnreachable)
				continue
			}
			r.here = r.here || len(ids) > 0
			var listedNow []string
			for _, id := range ids {
				if !slices.Contains(retry[k], id) {
					listedNow = append(listedNow, id)
				}
			}
			if len(r.removeIDs(ctx, lister, t, k, retry[k], "", false)) > 0 {
				r.asIs = true
			}
			if len(r.removeIDs(ctx, lister, t, k, listedNow, NoteNotListed, true)) > 0 {
				r.asIs = true
			}
		}
	}
	if t.procs != nil {
		r.procs = <-procs
		r.processes(t)
	}
	return r
}

// A network the engine refused as in use is asked again at once, after
// the rest of the run went (a sandbox the lists named later than its
// network). Where this reaping removed the run's sandboxes, the engine may
// still hold their endpoints for a moment after it answered their removal
// (seen on Docker 20.10 under load: a run's network refused after both its
// containers were gone, and gone a little later): later passes follow,
// further and further apart (endpointPause), for up to endpointWait and
// within ctx's deadline (endpointsMayGo). A network held by a sandbox that
// is not the run's (a keep-alive that joined it) is then kept, as before,
// for a later sweep. (A watchdog removes what it was told by id, and asks
// again for what is left in its last look, after its settle.)
const (
	// endpointWait bounds how long a reaping waits for the endpoints of
	// the sandboxes it removed to be released.
	endpointWait = 5 * time.Second
	// endpointCall is the time left for a call after a pause: a pass is
	// not begun that the caller's deadline would cut short.
	endpointCall = time.Second
)

// endpointPause is the wait before pass over the networks in use (none
// before the first two).
func endpointPause(pass int) time.Duration {
	if pass < 2 {
		return 0
	}
	return min(100*time.Millisecond<<(pass-2), time.Second)
}

// endpointsMayGo reports whether another pass follows pass (1 or later)
// over the networks in use, the first having begun at start: only while
// this reaping removed sandboxes of the run, endpointWait is not spent
// and ctx leaves time for the pause and a call after it (a sweep's budget
// is for every dead run, not this one's network).
func endpointsMayGo(ctx context.Context, pass int, start time.Time, sandboxesRemoved bool) bool {
	next := endpointPause(pass + 1)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < next+endpointCall {
		return false
	}
	return sandboxesRemoved && ctx.Err() == nil && time.Since(start)+next <= endpointWait
}

// pauseCtx waits d, or until ctx is done.
func pauseCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

// sandboxesRemoved reports whether this reaping removed a sandbox of the
// run: an engine that had them a moment ago may still hold their
// endpoints. (One gone before says nothing of a network's holder now.)
func (r *reaped) sandboxesRemoved() bool {
	return slices.ContainsFunc(r.items, func(it Item) bool { return it.Kind == names.SandboxKind && it.Outcome == ledger.Removed })
}

// NoteNotListed is the note on what a reaper found by the run's label
// alone, in its last look: nothing the run listed or told named it.
const NoteNotListed = "labelled with the run, not listed"

// removeListed removes the listed names of kind k (Backend.Remove), those
// of t.unlabelled by RemoveUnlabelled where the backend has it, with one
// outcome per name in their order.
func removeListed(ctx context.Context, b backend.Backend, t target, k names.Kind, ns []string) []error {
	ur, ok := b.(backend.UnlabelledRemover)
	if k != names.NetworkKind || !ok || len(t.unlabelled) == 0 || t.since.IsZero() {
		return b.Remove(ctx, k, t.run, ns)
	}
	var byAge, byLabel []string
	for _, n := range ns {
		if slices.Contains(t.unlabelled, n) {
			byAge = append(byAge, n)
		} else {
			byLabel = append(byLabel, n)
		}
	}
	got := map[string]error{}
	for _, part := range []struct {
		ns     []string
		remove func() []error
	}{
		{byAge, func() []error { return ur.RemoveUnlabelled(ctx, t.run, byAge, t.since) }},
		{byLabel, func() []error { return b.Remove(ctx, k, t.run, byLabel) }},
	} {
		if len(part.ns) == 0 {
			continue
		}
		errs := part.remove()
		for i, n := range part.ns {
			got[n] = outcomeAt(errs, i)
		}
	}
	out := make([]error, len(ns))
	for i, n := range ns {
		out[i] = got[n]
	}
	return out
}

// onEngine takes, for the run's sandboxes and networks, what another
// reaping of the same run found on another engine; its local processes
// stay as they were.
func (r *reaped) onEngine(other *reaped) {
	items := other.items
	for _, it := range r.items {
		if it.Kind == names.ProcessKind {
			items = append(items, it)
		}
	}
	r.items = items
	for _, k := range names.EngineKinds {
		r.kept[k] = other.kept[k]
	}
	r.asIs, r.here, r.hung = other.asIs, other.here, other.hung
}

// forget makes everything of the engine's that it had none of
// Forgotten, with note.
func (r *reaped) forget(note string) {
	for i, it := range r.items {
		if it.Kind != names.ProcessKind && it.Outcome == ledger.AlreadyGone {
			r.items[i].Outcome, r.items[i].Note = ledger.Forgotten, note
		}
	}
}

// call makes one call to the engine, bounded by t.call.
func (r *reaped) call(ctx context.Context, t target, f func(context.Context) []error) []error {
	if t.call > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.call)
		defer cancel()
	}
	return f(ctx)
}

// removeIDs removes ids of kind k by id and returns those that may still
// exist. quiet: an id already gone is not an item (a look by label that
// raced another remover's removal, or a retry of what an earlier pass
// saw go).
func (r *reaped) removeIDs(ctx context.Context, lister backend.RunLister, t target, k names.Kind, ids []string, note string, quiet bool) (failed []string) {
	if len(ids) == 0 {
		return nil
	}
	if r.hung {
		for _, id := range ids {
			r.note(Item{Kind: k, ID: id, Name: t.toldNames[k][id], Outcome: ledger.Kept, Note: "the engine did not answer an earlier call"})
		}
		return ids
	}
	errs := r.call(ctx, t, func(ctx context.Context) []error { return lister.RemoveIDs(ctx, k, ids) })
	for i, id := range ids {
		err := outcomeAt(errs, i)
		it := outcome(k, id, err)
		it.ID, it.Name = id, cmp.Or(t.toldNames[k][id], r.found[k][id], id)
		if note != "" && it.Note == "" {
			it.Note = note
		}
		r.here = r.here || err == nil
		if !it.Outcome.Gone() && it.Outcome != ledger.NotOwned {
			failed = append(failed, id)
			r.hung = r.hung || t.giveUp && errors.Is(err, backend.ErrUnreachable)
		}
		if it.Outcome == ledger.AlreadyGone && quiet {
			continue
		}
		r.note(it)
	}
	return failed
}

// note adds it, or replaces what an earlier pass found of the same id: an
// id kept by the first pass and removed by the second is removed, and one
// removed by the first and gone in the second stays removed. A name asked
// for by name and told already gone, then found by the run's label under
// that name (the engine finished its create in between), is one thing:
// what the look by label did with it takes its place, listed as it was.
func (r *reaped) note(it Item) {
	if it.ID != "" {
		for i, old := range r.items {
			if old.Kind == it.Kind && old.ID == it.ID {
				if !(it.Outcome == ledger.AlreadyGone && old.Outcome == ledger.Removed) {
					r.items[i] = it
				}
				return
			}
		}
		for i, old := range r.items {
			if old.Kind == it.Kind && old.ID == "" && old.Name == it.Name && old.Outcome == ledger.AlreadyGone {
				if it.Note == NoteNotListed {
					it.Note = ""
				}
				r.items[i] = it
				return
			}
		}
	}
	r.items = append(r.items, it)
}

// processes adds what the end of the run's local processes found: ended,
// escaped (not signalled), left, or not proven the run's (kept; forgotten
// by hand), and whether their lines must stay.
func (r *reaped) processes(t target) {
	res := r.procs
	item := func(p proctree.Proc, o ledger.Outcome, note string) Item {
		return Item{Kind: names.ProcessKind, ID: strconv.Itoa(p.PID), Name: p.Command, Outcome: o, Note: note}
	}
	for _, p := range res.Ended {
		r.items = append(r.items, item(p, ledger.Ended, p.Why))
	}
	for _, p := range res.Escaped {
		r.items = append(r.items, item(p, ledger.Escaped, p.Why+"; "+escapedHint(t.run, p)))
	}
	for _, p := range res.Left {
		r.items = append(r.items, item(p, ledger.Kept, p.Why))
	}
	for _, p := range res.NotProven {
		if t.byHand {
			r.items = append(r.items, item(p, ledger.NotOwned, p.Why+"; forgotten by hand"))
			continue
		}
		r.items = append(r.items, item(p, ledger.Kept, p.Why))
	}
	switch {
	case errors.Is(res.Unproven, proctree.ErrUnsupported) && t.byHand:
		r.items = append(r.items, Item{Kind: names.ProcessKind, Name: "(the run's processes)", Outcome: ledger.AlreadyGone, Note: res.Unproven.Error() + "; forgotten by hand, nothing signalled"})
	case res.Unproven != nil:
		note := res.Unproven.Error()
		if errors.Is(res.Unproven, proctree.ErrUnsupported) {
			note += " (rightsize sweep --run " + t.run + " forgets them)"
		}
		r.items = append(r.items, Item{Kind: names.ProcessKind, Name: "(the run's processes)", Outcome: ledger.Kept, Note: note})
		r.procsKept = true
	case len(res.Escaped) > 0 || len(res.Left) > 0 || !t.byHand && len(res.NotProven) > 0:
		r.procsKept = true
	}
}
