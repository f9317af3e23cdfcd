//go:build linux

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/e2e/chaos/internal/plan"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// created takes note of an object the backend made, by process by.
func (h *harness) created(obj object) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := obj.kind + "/" + obj.name
	o := obj
	h.objects[key] = &o
	h.seen.created++
	if obj.run != "" && h.byRun[obj.run] == nil {
		if ow := h.ownerAtLocked(obj.createdBy, obj.at); ow != nil {
			h.mapRunLocked(obj.run, ow)
		}
	}
	if ow := h.byRun[obj.run]; ow != nil {
		ow.eventLocked(obj.at, "the backend made %s (by %s)", obj.String(), h.whoLocked(obj.createdBy, obj.at))
	}
}

// removed takes note of an object's removal by process by, at at, and
// judges it: nothing of a live owner may go, but by the owner itself.
func (h *harness) removed(obj object, by int, at time.Time) { h.removedAt(obj, by, at, at, at, nil) }

// forget drops an object the harness does not judge the removal of.
func (h *harness) forget(obj object) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.objects, obj.kind+"/"+obj.name)
}

// removedAt is removed, for an object that process by asked at asked to
// remove, gone at at, and already stopped (killed) at earliest: the owner
// must have been dead by earliest, unless it asked itself, alive.
// unheard, when not nil, tells later whether the remover never heard that
// it was removed (removal.unheard).
func (h *harness) removedAt(obj object, by int, asked, at, earliest time.Time, unheard func() (bool, string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.objects, obj.kind+"/"+obj.name)
	if obj.keepAlive != "" || strings.HasPrefix(obj.name, "rz-reuse-") {
		h.kaPending = append(h.kaPending, removal{obj: obj, by: by, at: at})
		h.checkPending(false)
		return
	}
	o := h.byRun[obj.run]
	if o == nil {
		h.notes["a removal of an object of a run no owner was seen to have"]++
		return
	}
	o.eventLocked(at, "%s removed by %s", obj.String(), h.whoLocked(by, asked))
	if by == o.pid && !asked.Before(o.spawnAt) && (o.exitAt.IsZero() || !asked.After(o.exitAt)) {
		// Its own, though the engine may have finished it after the
		// owner's death.
		h.seen.own++
		return
	}
	h.seen.reaped++
	rm := removal{obj: obj, by: by, asked: asked, at: at, earliest: earliest, unheard: unheard}
	h.removals = append(h.removals, rm)
	h.pending = append(h.pending, rm)
	h.checkPending(false)
}

// checkPending judges each removal whose owner's death is known; at the
// end (final), the rest too.
func (h *harness) checkPending(final bool) {
	keep := h.pending[:0]
	for _, rm := range h.pending {
		o := h.byRun[rm.obj.run]
		if o == nil || !o.dead && !final {
			keep = append(keep, rm)
			continue
		}
		switch {
		case !o.dead || rm.at.Before(o.deathLB):
			h.violateLocked(o, fmt.Sprintf("%s of owner #%d was removed at %s by %s while its owner lived (its death came at %s or later)",
				rm.obj.String(), o.plan.Index, stamp(rm.at, h.start), h.whoLocked(rm.by, rm.asked), stamp(o.deathLB, h.start)))
		case !rm.earliest.IsZero() && rm.earliest.Before(o.deathLB):
			h.violateLocked(o, fmt.Sprintf("%s of owner #%d was killed at %s, while its owner lived (its death came at %s or later), and removed at %s by %s",
				rm.obj.String(), o.plan.Index, stamp(rm.earliest, h.start), stamp(o.deathLB, h.start), stamp(rm.at, h.start), h.whoLocked(rm.by, rm.asked)))
		}
	}
	h.pending = keep
	kaKeep := h.kaPending[:0]
	for _, rm := range h.kaPending {
		if !h.judgeKeepAliveLocked(rm.obj, rm.by, rm.at, final) {
			kaKeep = append(kaKeep, rm)
		}
	}
	h.kaPending = kaKeep
	for _, o := range h.owners {
		if o.dead {
			for _, p := range o.procs {
				h.judgeProcessLocked(p)
			}
		}
	}
}

// judgeKeepAliveLocked: a keep-alive sandbox may go only while no owner
// holds it (from before its adoption, said just after, to its death).
// It is judged once every owner that held it by then is dead (false
// until then), or at the end (final).
func (h *harness) judgeKeepAliveLocked(obj object, by int, at time.Time, final bool) bool {
	var holders []*owner
	for _, o := range h.owners {
		for _, k := range o.keep {
			if k.name == obj.name && !at.Before(k.since) {
				if !o.dead && !final {
					return false
				}
				holders = append(holders, o)
				break
			}
		}
	}
	for _, o := range holders {
		var since time.Time
		for _, k := range o.keep {
			if k.name == obj.name && !at.Before(k.since) {
				since = k.since
				break
			}
		}
		if o.dead && !at.Before(o.deathLB) {
			continue
		}
		h.violateLocked(o, fmt.Sprintf("%s, held by owner #%d since %s, was removed at %s by %s, before its owner died (at %s or later)",
			obj.String(), o.plan.Index, stamp(since, h.start), stamp(at, h.start), h.whoLocked(by, at), stamp(o.deathLB, h.start)))
	}
	return true
}

// ownerAtLocked is the owner whose pid was pid at instant at.
func (h *harness) ownerAtLocked(pid int, at time.Time) *owner {
	for i := len(h.owners) - 1; i >= 0; i-- {
		o := h.owners[i]
		if o.pid == pid && !at.Before(o.spawnAt) && (o.exitAt.IsZero() || !at.After(o.exitAt)) {
			return o
		}
	}
	return nil
}

// holdsLocked reports whether anything of o is there now: an object of
// its run, a process of its not seen ended, a ledger file of its run.
func (h *harness) holdsLocked(o *owner) bool {
	for _, obj := range h.objects {
		if o.run != "" && obj.run == o.run {
			return true
		}
	}
	for _, p := range o.procs {
		if p.exitAt.IsZero() {
			return true
		}
	}
	return o.run != "" && ledger.HasFiles(filepath.Join(h.cache, ledger.RunsDir), o.run)
}

// track runs beside the owners: every 20 ms it notes which dead owners
// have nothing left, every 500 ms it reads the whole ledger (each file
// must parse) and the fates.
func (h *harness) track(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastLedger time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			h.clearTick(now)
			if now.Sub(lastLedger) > 500*time.Millisecond {
				lastLedger = now
				h.checkLedger()
				h.readFates()
			}
		}
	}
}

// clearTick notes, for each dead owner with something left, whether
// nothing is left now: the time from its death to that instant is the
// run's figure.
func (h *harness) clearTick(now time.Time) {
	runs := map[string]bool{}
	ents, _ := os.ReadDir(filepath.Join(h.cache, ledger.RunsDir))
	for _, e := range ents {
		// A killed sweeper's lock file and a killed writer's temporary
		// file are no owner's: swept once old enough.
		if id, ext, ok := strings.Cut(e.Name(), "."); ok && ledger.ValidRunID(id) && "."+ext != ledger.LockExt && !isTempName(e.Name()) {
			runs[id] = true
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range runs {
		if h.byRun[id] == nil {
			h.mapOrphanLocked(id)
		}
	}
	left := map[string]bool{}
	for _, obj := range h.objects {
		left[obj.run] = true
	}
	for _, o := range h.owners {
		if !o.dead || !o.clearAt.IsZero() {
			continue
		}
		if !o.hadAny {
			o.goneAt, o.clearAt = o.deathLB, o.deathLB
			continue
		}
		busy := o.run != "" && left[o.run]
		for _, p := range o.procs {
			busy = busy || p.exitAt.IsZero()
		}
		if busy {
			continue
		}
		if o.goneAt.IsZero() {
			o.goneAt = now
			o.eventLocked(now, "none of its sandboxes, networks or processes left")
		}
		if o.run == "" || !runs[o.run] {
			o.clearAt = now
			o.eventLocked(now, "nothing of it left, in the ledger either")
		}
	}
}

// mapOrphanLocked ties a run found in the ledger to its owner by its
// record's pid, when no event did.
func (h *harness) mapOrphanLocked(id string) {
	rf, err := ledger.ReadRun(h.cache, id)
	if err != nil || rf.RecordErr != nil {
		return
	}
	at, err := rf.Record.Started()
	if err != nil {
		return
	}
	for i := len(h.owners) - 1; i >= 0; i-- {
		o := h.owners[i]
		if o.pid == rf.Record.PID && o.spawnAt.Sub(at).Abs() < 2*time.Second {
			h.mapRunLocked(id, o)
			return
		}
	}
}

// checkLedger reads every file of the ledger: each must parse, as this
// module reads it and, for the family's record, as the other members do.
func (h *harness) checkLedger() {
	var bad []string
	runsDir := filepath.Join(h.cache, ledger.RunsDir)
	ents, _ := os.ReadDir(runsDir)
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(runsDir, name)
		if isTempName(name) {
			continue
		}
		switch filepath.Ext(name) {
		case ledger.RecordExt:
			b, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if _, perr := ledger.ParseRecord(b); err != nil || perr != nil {
				bad = append(bad, fmt.Sprintf("runs/%s does not parse: %v %v: %q", name, err, perr, clip(b)))
			} else if why := familyParses(b); why != "" {
				bad = append(bad, fmt.Sprintf("runs/%s is not a record the other members read: %s: %q", name, why, clip(b)))
			}
		case ledger.OwnRecordExt:
			b, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if _, perr := ledger.ParseRecord(b); err != nil || perr != nil {
				bad = append(bad, fmt.Sprintf("runs/%s does not parse: %v %v: %q", name, err, perr, clip(b)))
			}
		case ledger.SandboxesExt, ledger.NetworksExt, ledger.ProcessesExt, ledger.VolumesExt, ledger.ImagesExt:
			lf, err := ledger.ReadLines(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				bad = append(bad, fmt.Sprintf("runs/%s cannot be read: %v", name, err))
			} else if lf.RejectedCount > 0 {
				bad = append(bad, fmt.Sprintf("runs/%s has %d lines that are no name: %v", name, lf.RejectedCount, lf.Rejected))
			}
		}
	}
	fates, err := ledger.ReadFates(h.cache)
	if err != nil {
		bad = append(bad, "fates: "+err.Error())
	}
	for _, f := range fates {
		if f.Err != nil && !errors.Is(f.Err, fs.ErrNotExist) {
			bad = append(bad, fmt.Sprintf("fate %s does not parse: %v", filepath.Base(f.Path), f.Err))
		}
	}
	hashes, _ := ledger.ReuseHashes(h.cache)
	for _, hash := range hashes {
		b, err := os.ReadFile(ledger.ReusePath(h.cache, hash))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if _, perr := ledger.ParseReuseEntry(b); err != nil || perr != nil {
			bad = append(bad, fmt.Sprintf("reuse/%s.json does not parse: %v %v: %q", hash, err, perr, clip(b)))
		}
	}
	if len(bad) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range bad {
		if h.notes["ledger: "+b] == 0 {
			h.notes["ledger: "+b]++
			h.violateLocked(h.ownerOfFileLocked(b), "the ledger is not parseable: "+b)
		}
	}
}

// ownerOfFileLocked is the owner of the run a message about a file names.
func (h *harness) ownerOfFileLocked(msg string) *owner {
	for id, o := range h.byRun {
		if strings.Contains(msg, id) {
			return o
		}
	}
	return nil
}

// staleLockAge is the age at which a sweep deletes a lock file no run
// goes with (reaper/sweep.go).
const staleLockAge = time.Minute

// isTempName: a writer's temporary file, renamed over the real one when
// whole.
func isTempName(name string) bool {
	return strings.Contains(name, ".tmp")
}

// familyParses says why the other members would not read data as a run
// record, or "" when all three would: a stand-in for their parsers, not
// their code (Node's parseRunRecord wants a number pid, a string
// startedIso and backend exactly docker or msb; Rust's serde a u32 pid
// and strings; Kotlin's regex the three keys; see
// design/ledger-contract.md §12).
func familyParses(data []byte) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return "not a JSON object: " + err.Error()
	}
	var pid float64
	if err := json.Unmarshal(m["pid"], &pid); err != nil || pid <= 0 || pid != float64(uint32(pid)) {
		return "pid is not a positive 32-bit integer"
	}
	var started, be string
	if err := json.Unmarshal(m["startedIso"], &started); err != nil {
		return "startedIso is not a string"
	}
	if _, err := ledger.ParseISO(started); err != nil {
		return "startedIso does not parse: " + err.Error()
	}
	if err := json.Unmarshal(m["backend"], &be); err != nil || be != "docker" && be != "msb" {
		return fmt.Sprintf("backend %s is neither docker nor msb", m["backend"])
	}
	return ""
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// readFates keeps every fate written (the folder keeps only the newest
// few hundred), by run and file, as last read.
func (h *harness) readFates() {
	fates, err := ledger.ReadFates(h.cache)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range fates {
		if f.Err != nil {
			continue
		}
		m := h.fates[f.Run]
		if m == nil {
			m = map[string]ledger.Fate{}
			h.fates[f.Run] = m
		}
		// A fate is written once, but a run's second watchdog joins its
		// share to the first's: the newest content is the fate.
		name := filepath.Base(f.Path)
		old, seen := m[name]
		if seen && old.ByPID == f.ByPID && old.By == f.By && len(old.Items) == len(f.Items) && old.FinishedISO == f.FinishedISO {
			continue
		}
		m[name] = f.Fate
		if o := h.byRun[f.Run]; o != nil {
			what := "fate"
			if seen {
				what = "fate joined"
			}
			o.eventLocked(f.Written, "%s %s: by %s (pid %d), %d items", what, name, f.By, f.ByPID, len(f.Items))
		}
	}
}

// finish is the end: every owner is dead and the faults have stopped.
// The watchdogs are given time to end, one sweep runs, and then nothing
// of any owner may be left.
func (h *harness) finish(ctx context.Context) error {
	if ctx.Err() != nil {
		// Interrupted: the owners were cut short, no final sweep can run,
		// and what they left says nothing of the library.
		return fmt.Errorf("interrupted after %d deaths: the end (a final sweep, then nothing of a dead owner left) is not judged", h.deaths())
	}
	deadline := time.Now().Add(h.eng.settle)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		busy := false
		for _, p := range h.ours() {
			busy = busy || p.role == "watchdog"
		}
		if !busy {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.eng.settleEngine(ctx, h)
	if d, ok := h.eng.side.(*dockerSide); ok && d.restarted {
		if err := ensureEngine(ctx, h); err != nil {
			h.violate(nil, "the engine does not answer at the end, after its restarts: "+err.Error())
		}
	}
	sweepCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	out, err := h.cliRun(sweepCtx, "sweep")
	cancel()
	if err != nil {
		h.violate(nil, fmt.Sprintf("the final rightsize sweep failed: %v", err), lastLines(out, 30)...)
	}
	h.eng.settleEngine(ctx, h)
	// Everything the engine and the ledger say now.
	h.readFates()
	left := h.eng.leftovers(ctx, h)
	h.mu.Lock()
	for _, l := range left {
		h.defectLocked(l.class, l.owner, l.msg)
	}
	h.mu.Unlock()
	runsDir := filepath.Join(h.cache, ledger.RunsDir)
	ents, _ := os.ReadDir(runsDir)
	byRun := map[string][]string{}
	for _, e := range ents {
		if isTempName(e.Name()) {
			// A writer killed before its rename: sweeps delete these an
			// hour old, as the family does.
			h.note("a temporary file of a killed writer stays in runs/ (swept once an hour old)")
			continue
		}
		id, ext, _ := strings.Cut(e.Name(), ".")
		if "."+ext == ledger.LockExt {
			// A sweeper killed while it held its claim leaves its lock
			// file; a sweep deletes it once a minute old.
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) < staleLockAge {
				h.note("a lock file of a sweeper killed holding its claim stays in runs/ (swept once a minute old)")
				continue
			}
		}
		byRun[id] = append(byRun[id], e.Name())
	}
	for _, p := range h.ours() {
		h.mu.Lock()
		h.violateLocked(h.byRun[p.run], fmt.Sprintf("%s still runs after every owner died and a sweep ran", p))
		h.mu.Unlock()
	}
	h.mu.Lock()
	ids := make([]string, 0, len(byRun))
	for id := range byRun {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		h.violateLocked(h.byRun[id], fmt.Sprintf("the ledger still has run %s's files %v after every owner died and a sweep ran", id, byRun[id]), lastLines(out, 20)...)
	}
	h.mu.Unlock()
	h.checkUseLocks()
	h.checkFates()
	h.eng.cleanup(ctx, h)
	return nil
}

// cliRun runs the rightsize command to its end.
func (h *harness) cliRun(ctx context.Context, args ...string) (string, error) {
	cmd := execCommandContext(ctx, h.cli, args...)
	cmd.Env = h.env
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// checkUseLocks: no keep-alive use lock may be held once every owner is
// dead (a lock held by no process is free; a held one is a process that
// outlived its purpose).
func (h *harness) checkUseLocks() {
	dir, err := ledger.UseDir(h.tmp)
	if err != nil {
		return
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".use") {
			continue
		}
		l := ledger.NewFileLock(filepath.Join(dir, e.Name()))
		ok, err := l.TryLock()
		if err != nil || !ok {
			h.violate(nil, fmt.Sprintf("keep-alive use lock %s is still held after every owner died (%v)", e.Name(), err))
			continue
		}
		_ = l.Unlock()
	}
}

// checkFates: every death whose things a reaper removed has a fate, the
// fate says what was removed, by whom, and one death has one fate (a
// second only after the first kept something).
func (h *harness) checkFates() {
	h.mu.Lock()
	defer h.mu.Unlock()
	byRun := map[string][]removal{}
	for _, rm := range h.removals {
		if slices.Contains(h.eng.untold, rm.obj.kind) {
			continue // no ledger line names it: no fate tells it
		}
		if killedAt, killed := h.killed[rm.by]; killed && !rm.asked.After(killedAt) {
			continue // killed half-way: its fate may never have been written
		}
		if o := h.ownerAtLocked(rm.by, rm.at); o != nil && o.plan.Death != plan.Clean {
			continue // an owner's sweep, and the owner died before it could write
		}
		byRun[rm.obj.run] = append(byRun[rm.obj.run], rm)
	}
	for run, rms := range byRun {
		o := h.byRun[run]
		fates := h.fates[run]
		if len(fates) == 0 {
			var what []string
			for _, rm := range rms {
				what = append(what, fmt.Sprintf("%s by %s at %s", rm.obj.String(), h.whoLocked(rm.by, rm.asked), stamp(rm.at, h.start)))
			}
			h.violateLocked(o, fmt.Sprintf("run %s's death has no fate, though %d of its things were removed: %s", run, len(rms), strings.Join(what, "; ")))
			continue
		}
		for _, rm := range rms {
			var claims []string
			for name, f := range fates {
				for _, it := range f.Items {
					// A thing found by its label alone is told by its id.
					if (it.Name == rm.obj.name || it.ID == rm.obj.id) && it.Outcome == ledger.Removed {
						claims = append(claims, fmt.Sprintf("%s (by %s, pid %d)", name, f.By, f.ByPID))
						if f.ByPID != rm.by && !(rm.by == 0 && h.eng.blindRemovers) {
							h.violateLocked(o, fmt.Sprintf("fate %s says %s was removed by pid %d, but pid %d removed it (%s)", name, rm.obj.String(), f.ByPID, rm.by, h.whoLocked(rm.by, rm.asked)))
						}
					}
				}
			}
			if unheard, fault := rm.unheardNow(); unheard && len(claims) == 0 {
				// Its remover never heard it went: it tells kept, or nothing
				// new, and a later look already gone; some fate of the death
				// still names it.
				told := fatesName(fates, rm.obj)
				if len(told) == 0 {
					h.violateLocked(o, fmt.Sprintf("%s, removed by %s at %s, whose answer never reached it, is named by none of the run's fates", rm.obj.String(), h.whoLocked(rm.by, rm.asked), stamp(rm.at, h.start)), fateLines(fates)...)
					continue
				}
				why := "its answer dropped by the fault proxy"
				if fault != faultNames[faultLost] {
					// No fault of the harness's: the remover gave the call up,
					// or the engine's connection broke (a restart).
					why = "no fault: the remover had given the call up, or the engine's connection broke"
				}
				// Whether a later look told it already gone is counted apart:
				// the evidence for asking that of every such removal.
				as := "named already gone by a later fate"
				if !slices.Contains(told, ledger.AlreadyGone) {
					as = "named by its death's fates only as " + joinOutcomes(told)
				}
				h.notes["a removal whose answer never reached its remover ("+why+"), "+as]++
				continue
			}
			// Where removers are unseen (Kubernetes), what the garbage
			// collector took with the run's Lease may be told by no fate
			// (a pod made after the reaper's look); never by two.
			if len(claims) > 1 || len(claims) == 0 && !h.eng.blindRemovers {
				h.violateLocked(o, fmt.Sprintf("%s, removed by %s at %s, is told removed by %d fates %v, not one", rm.obj.String(), h.whoLocked(rm.by, rm.asked), stamp(rm.at, h.start), len(claims), claims), fateLines(fates)...)
			}
		}
	}
	for run, fates := range h.fates {
		if o := h.byRun[run]; len(fates) < 2 || o != nil && len(o.wdKilled) > 0 {
			// A watchdog the harness killed tells nothing of what it did;
			// the sweep after it tells the rest: two fates, rightly.
			continue
		}
		names := make([]string, 0, len(fates))
		for n := range fates {
			// A removal of what the engine made after the run was
			// reaped is another event, with a fate of its own.
			if fates[n].Note != reaper.NoteLate {
				names = append(names, n)
			}
		}
		if len(names) < 2 {
			continue
		}
		sort.Strings(names)
		for _, n := range names[:len(names)-1] {
			kept := slices.ContainsFunc(fates[n].Items, func(it ledger.FateItem) bool {
				return it.Outcome == ledger.Kept || it.Outcome == ledger.Escaped
			})
			if !kept {
				h.violateLocked(h.byRun[run], fmt.Sprintf("run %s has %d fates, and %s, not its last, kept nothing: one death, two fates", run, len(fates), n), fateLines(fates)...)
				break
			}
		}
	}
}

// fateLines are a run's fates, one line each with its items, in name
// order: what a violation about them prints.
func fateLines(fates map[string]ledger.Fate) []string {
	names := slices.Sorted(maps.Keys(fates))
	out := make([]string, 0, len(names))
	for _, n := range names {
		f := fates[n]
		var items []string
		for _, it := range f.Items {
			items = append(items, it.Kind+" "+cmp.Or(it.Name, it.ID)+" "+string(it.Outcome))
		}
		out = append(out, fmt.Sprintf("fate %s: by %s (pid %d): %s", n, f.By, f.ByPID, strings.Join(items, ", ")))
	}
	return out
}

// unheardNow is rm.unheard's answer now (false for a removal with none).
func (rm removal) unheardNow() (bool, string) {
	if rm.unheard == nil {
		return false, ""
	}
	return rm.unheard()
}

// fatesName is what the run's fates tell of obj: the outcomes of their
// items for it, each once, sorted; none when no fate names it.
func fatesName(fates map[string]ledger.Fate, obj object) []ledger.Outcome {
	var out []ledger.Outcome
	for _, f := range fates {
		for _, it := range f.Items {
			if (obj.name != "" && it.Name == obj.name || obj.id != "" && it.ID == obj.id) && !slices.Contains(out, it.Outcome) {
				out = append(out, it.Outcome)
			}
		}
	}
	slices.Sort(out)
	return out
}

// joinOutcomes is outcomes as "kept" or "kept, escaped".
func joinOutcomes(outcomes []ledger.Outcome) string {
	s := make([]string, len(outcomes))
	for i, o := range outcomes {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}
