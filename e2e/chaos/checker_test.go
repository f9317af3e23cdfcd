//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/chaos/internal/plan"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// TestFamilyParses: the checker's stand-in for the other members'
// parsers reads every record the family writes (the ledger's golden
// records) as they do, and none of the records they reject. The records
// every member reads as a live run's must pass; an empty start and Rust's
// "microsandbox" backend are records the others reap as unparseable, so
// Go never writes them.
func TestFamilyParses(t *testing.T) {
	root := filepath.Join("..", "..", "ledger", "testdata")
	refused := map[string]string{
		"rust_empty_started.json": "an empty startedIso",
		"rust_microsandbox.json":  "backend microsandbox, which Node reads as unparseable",
	}
	good, err := filepath.Glob(filepath.Join(root, "records", "*.json"))
	if err != nil || len(good) == 0 {
		t.Fatalf("no golden records under %s: %v", root, err)
	}
	for _, p := range good {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		why := familyParses(b)
		if reason, ok := refused[filepath.Base(p)]; ok {
			if why == "" {
				t.Errorf("%s passes, but it has %s", filepath.Base(p), reason)
			}
			continue
		}
		if why != "" {
			t.Errorf("%s: %s; every member reads it", filepath.Base(p), why)
		}
	}
	bad, _ := filepath.Glob(filepath.Join(root, "bad", "*.json"))
	for _, p := range bad {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(p) == "ticks_string.json" {
			continue // a field of Go's own, which the others ignore; ParseRecord refuses it
		}
		if familyParses(b) == "" {
			t.Errorf("bad record %s passes", filepath.Base(p))
		}
	}
}

// newTestHarness is a harness with no owner process and no backend, for
// the checker's rules alone.
func newTestHarness() *harness {
	return &harness{start: time.Now(), eng: &engine{name: "memory"}, byRun: map[string]*owner{}, objects: map[string]*object{},
		killed: map[int]time.Time{}, notes: map[string]int{}, known: map[string]int{}, fates: map[string]map[string]ledger.Fate{}}
}

// TestLiveOwnersThingsStay: a removal of an owner's sandbox by another
// process is a violation when it comes before the owner's death, and
// only then; the owner's own removal never is; a removal judged before
// the owner's death is known waits for it.
func TestLiveOwnersThingsStay(t *testing.T) {
	h := newTestHarness()
	t0 := h.start
	o := &owner{h: h, plan: plan.Owner{Index: 1}, pid: 100, spawnAt: t0, procs: map[int]*proc{}}
	h.owners = append(h.owners, o)
	h.mapRunLocked("0123abcd", o)
	obj := func(n string) object {
		return object{kind: "sandbox", name: n, id: n, run: "0123abcd", createdBy: 100, at: t0}
	}
	for _, n := range []string{"rz-0123abcd-1", "rz-0123abcd-2", "rz-0123abcd-3"} {
		h.created(obj(n))
	}
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	h.removed(obj("rz-0123abcd-1"), 100, ms(10)) // its own
	h.removed(obj("rz-0123abcd-2"), 200, ms(20)) // another's, before the death below
	if n := h.violationCount(); n != 0 {
		t.Fatalf("%d violations before the owner's death is known: a removal must wait for it", n)
	}
	h.mu.Lock()
	o.killedAt, o.exitAt = ms(30), ms(31)
	o.finishLocked()
	h.mu.Unlock()
	if n := h.violationCount(); n != 1 {
		t.Fatalf("%d violations once the owner's death is known, want 1: the removal 10 ms before it", n)
	}
	h.removed(obj("rz-0123abcd-3"), 200, ms(40)) // after the death: a reaper's
	if n := h.violationCount(); n != 1 {
		t.Errorf("%d violations after a removal that came after the death, want still 1", n)
	}
}

// Where the backend cannot say who removed something (Kubernetes), a
// removal is the owner's own only inside a step that may remove what it
// made, a moment after one, or once it ends itself; a removal at any other
// instant of its life is someone else's, which the checker judges.
func TestOwnerMayRemove(t *testing.T) {
	h := &harness{byRun: map[string]*owner{}, objects: map[string]*object{}, notes: map[string]int{}}
	o := h.newOwner(plan.Owner{Death: plan.Clean, Steps: []plan.Step{{Op: plan.Sandbox}, {Op: plan.Pause}, {Op: plan.Stop}}})
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	may := func(ms int) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return o.mayRemoveLocked(at(ms))
	}
	if may(0) {
		t.Error("before any step: its own removal")
	}
	o.onEvent(at(10), plan.EvBegin, []string{"0", plan.Sandbox})
	if !may(20) {
		t.Error("inside a start (which releases what it made when it fails): not its own")
	}
	o.onEvent(at(30), plan.EvDone, []string{"0", plan.Sandbox, "rz-0000abcd-1"})
	if !may(30+int(ownGrace/time.Millisecond)) || may(31+int(ownGrace/time.Millisecond)) {
		t.Errorf("ownGrace after a step: %v, then %v; want its own, then not", may(30+int(ownGrace/time.Millisecond)), may(31+int(ownGrace/time.Millisecond)))
	}
	o.onEvent(at(5000), plan.EvBegin, []string{"1", plan.Pause})
	if may(5010) {
		t.Error("inside a pause: its own removal")
	}
	o.onEvent(at(6000), plan.EvBegin, []string{"2", plan.Stop})
	o.onEvent(at(6100), plan.EvFail, []string{"2", "stop: an error"})
	if !may(6050) || may(9000) {
		t.Error("a stop that failed: its removal not its own inside, or still after the grace")
	}
	o.onEvent(at(10000), plan.EvBegin, []string{"3", "idle"})
	if !may(10001) || may(9999) {
		t.Error("a clean end's cleanups: not its own, or its own before they began")
	}
	// Its last word before it ends itself: cleanups follow a panic in
	// the test, none a SIGKILL of its own.
	for how, cleans := range map[string]bool{plan.Panic: true, plan.SelfKill: false, plan.Exit: false} {
		k := h.newOwner(plan.Owner{Death: how, Steps: []plan.Step{{Op: plan.Sandbox}}})
		k.onEvent(at(0), plan.EvDying, []string{how})
		h.mu.Lock()
		got := k.mayRemoveLocked(at(5000))
		h.mu.Unlock()
		if got != cleans {
			t.Errorf("after dying %q: its own removal %v, want %v", how, got, cleans)
		}
	}
}

// TestProcessStoppedBeforeItsStepIsDone: an async step's process can be
// stopped by a later step before the async step's done (its pid) reaches
// the harness; the owner's word that it ends it still counts, and its end
// is no violation (a 10,000-death run called it one).
func TestProcessStoppedBeforeItsStepIsDone(t *testing.T) {
	h := &harness{byRun: map[string]*owner{}, objects: map[string]*object{}, notes: map[string]int{}, cache: t.TempDir(), start: time.Now()}
	child := exec.Command("sleep", "60")
	child.Env = []string{h.ourEnv(), "RIGHTSIZE_PROCESS=rz-0000abcd-p1"}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	// Until its exec, the child's environment is this process's.
	proctest.WaitUntil(t, 10*time.Second, "the child's exec", func() bool {
		return hasEntry(readEnviron(child.Process.Pid), h.ourEnv())
	})
	pid := strconv.Itoa(child.Process.Pid)
	o := h.newOwner(plan.Owner{Death: plan.Kill, Steps: []plan.Step{{Op: plan.Process, Async: true}, {Op: plan.Stop}}})
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	o.onEvent(at(0), plan.EvBegin, []string{"0", plan.Process})
	o.onEvent(at(10), plan.EvBegin, []string{"1", plan.Stop})
	o.onEvent(at(11), plan.EvProcStop, []string{pid})
	o.onEvent(at(12), plan.EvDone, []string{"0", plan.Process, pid})

	h.mu.Lock()
	defer h.mu.Unlock()
	p := o.procs[child.Process.Pid]
	if p == nil {
		t.Fatalf("the harness does not watch the owner's process %s (notes %v)", pid, h.notes)
	}
	if !p.stopAt.Equal(at(11)) {
		t.Fatalf("the process's stop word is at %v, want the owner's, at %v", p.stopAt, at(11))
	}
	p.exitAt, o.dead, o.deathLB = at(50), true, at(100)
	h.judgeProcessLocked(p)
	if len(h.violations) > 0 {
		t.Errorf("the owner ended its process itself, and the checker says %q", h.violations[0].msg)
	}
}

// TestUnheardRemoval: a removal the engine made whose answer never reached
// its remover (the remover's own deadline had passed, a restart broke the
// connection, the fault proxy dropped it) is told removed by no fate: the
// remover said kept, a later sweep already gone. That is no violation so
// long as a fate of the death names the thing; a removal its remover heard
// of, told by no fate, still is, and so is an unheard one no fate names.
// (A 1,000-death Docker run with faults, seed 20261205, called two such
// removals violations: first uses' sweeps whose 5 s budget ran out while
// the engine, slowed by the faults, was still removing a network.)
func TestUnheardRemoval(t *testing.T) {
	const run = "0123abcd"
	net := object{kind: "network", name: "rz-net-0123abcd", id: "9f0e", run: run}
	item := func(o ledger.Outcome) ledger.FateItem {
		return ledger.FateItem{Kind: "network", Name: net.name, Outcome: o}
	}
	for _, c := range []struct {
		name       string
		unanswered bool
		fates      map[string]ledger.Fate
		violations int
		note       string // a note the checker must count, if any
	}{
		{"unheard, kept then already gone", true, map[string]ledger.Fate{
			run + "-1.json": {Run: run, By: reaper.ByWatchdog, ByPID: 200, Items: []ledger.FateItem{item(ledger.Kept)}},
			run + "-2.json": {Run: run, By: reaper.BySweep, ByPID: 400, Items: []ledger.FateItem{item(ledger.AlreadyGone)}},
		}, 0, "named already gone by a later fate"},
		{"unheard, told kept by every fate", true, map[string]ledger.Fate{
			run + "-1.json": {Run: run, By: reaper.ByWatchdog, ByPID: 200, Items: []ledger.FateItem{item(ledger.Kept)}},
		}, 0, "named by its death's fates only as kept"},
		{"heard, and no fate says removed", false, map[string]ledger.Fate{
			run + "-1.json": {Run: run, By: reaper.ByWatchdog, ByPID: 200, Items: []ledger.FateItem{item(ledger.Kept)}},
			run + "-2.json": {Run: run, By: reaper.BySweep, ByPID: 400, Items: []ledger.FateItem{item(ledger.AlreadyGone)}},
		}, 1, ""},
		{"unheard, and no fate names it", true, map[string]ledger.Fate{
			run + "-1.json": {Run: run, By: reaper.ByWatchdog, ByPID: 200, Items: []ledger.FateItem{{Kind: "sandbox", Name: "rz-0123abcd-1", Outcome: ledger.Removed}}},
		}, 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newTestHarness()
			o := &owner{h: h, plan: plan.Owner{Index: 1, Death: plan.Clean}, pid: 100, spawnAt: h.start, procs: map[int]*proc{}, run: run, dead: true}
			h.owners = append(h.owners, o)
			h.byRun[run] = o
			at := h.start.Add(time.Second)
			unheard := func() (bool, string) { return c.unanswered, "" }
			h.removals = append(h.removals, removal{obj: net, by: 300, asked: at.Add(-500 * time.Millisecond), at: at, earliest: at, unheard: unheard})
			h.fates[run] = c.fates
			h.checkFates()
			h.mu.Lock()
			defer h.mu.Unlock()
			if len(h.violations) != c.violations {
				var msgs []string
				for _, v := range h.violations {
					msgs = append(msgs, v.msg)
				}
				t.Errorf("%d violations, want %d: %q", len(h.violations), c.violations, msgs)
			}
			if c.note == "" {
				return
			}
			counted := 0
			for n, k := range h.notes {
				if strings.HasSuffix(n, c.note) {
					counted += k
				}
			}
			if counted != 1 {
				t.Errorf("the note ending %q counted %d times, want 1; notes: %v", c.note, counted, h.notes)
			}
		})
	}
}
