//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/chaos/internal/plan"
	"github.com/rightsize/rightsize-go/internal/ledger"
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
