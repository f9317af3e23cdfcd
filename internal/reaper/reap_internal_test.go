package reaper

import (
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
)

// A listed name a reaper asked for by name and was told already gone,
// then found by the run's label under that name (its create finished in
// between), is one item, removed; a name found by label that no ask
// missed is an item of its own.
func TestNoteFoundAfterGoneByName(t *testing.T) {
	r := &reaped{}
	r.items = append(r.items, Item{Kind: names.NetworkKind, Name: "rz-net-0a1b2c1", Outcome: ledger.AlreadyGone})
	if !r.goneByName(names.NetworkKind) || r.goneByName(names.SandboxKind) {
		t.Fatalf("goneByName: network %v, sandbox %v; want true, false", r.goneByName(names.NetworkKind), r.goneByName(names.SandboxKind))
	}
	r.note(Item{Kind: names.NetworkKind, ID: "9f0e", Name: "rz-net-0a1b2c1", Outcome: ledger.Removed, Note: NoteNotListed})
	r.note(Item{Kind: names.NetworkKind, ID: "7c2d", Name: "rz-net-0a1b2c2", Outcome: ledger.Removed, Note: NoteNotListed})
	r.note(Item{Kind: names.SandboxKind, ID: "5e6f", Name: "rz-net-0a1b2c1", Outcome: ledger.Removed, Note: NoteNotListed})
	want := []Item{
		{Kind: names.NetworkKind, ID: "9f0e", Name: "rz-net-0a1b2c1", Outcome: ledger.Removed},
		{Kind: names.NetworkKind, ID: "7c2d", Name: "rz-net-0a1b2c2", Outcome: ledger.Removed, Note: NoteNotListed},
		{Kind: names.SandboxKind, ID: "5e6f", Name: "rz-net-0a1b2c1", Outcome: ledger.Removed, Note: NoteNotListed},
	}
	if len(r.items) != len(want) {
		t.Fatalf("items %+v, want %+v", r.items, want)
	}
	for i := range want {
		got := r.items[i]
		if got.Kind != want[i].Kind || got.ID != want[i].ID || got.Name != want[i].Name || got.Outcome != want[i].Outcome || got.Note != want[i].Note {
			t.Errorf("item %d: %+v, want %+v", i, got, want[i])
		}
	}
	if r.goneByName(names.NetworkKind) {
		t.Error("the network told already gone is still so after the look by label removed it")
	}
}
