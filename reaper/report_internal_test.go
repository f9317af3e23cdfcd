package reaper

import (
	"strings"
	"testing"

	iledger "github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/ledger"
)

// The decisions are converted by their words: each must be the word the
// sweep gives, or a reaped run would read as some other decision.
func TestDecisionWords(t *testing.T) {
	for in, want := range map[reaper.Decision]Decision{
		reaper.LeftAlone: LeftAlone, reaper.Reaped: Reaped, reaper.Kept: KeptBack, reaper.WouldReap: WouldReap,
	} {
		if got := Decision(in); got != want {
			t.Errorf("the sweep's %q reads as %q, want %q", in, got, want)
		}
	}
}

// An item keeps its kind, and prints as the sweep's own does.
func TestItemKinds(t *testing.T) {
	for _, k := range names.Kinds {
		in := reaper.Item{Kind: k, ID: "4242", Name: "rz-0badc0de-1", Outcome: ledger.Kept, Note: "the engine did not answer\x1b[2J"}
		got := items([]reaper.Item{in})
		if len(got) != 1 || got[0].Kind != k.String() {
			t.Fatalf("%v: %+v", k, got)
		}
		if got[0].String() != in.String() {
			t.Errorf("%v: %q, want the sweep's %q", k, got[0], in)
		}
	}
	odd := Item{Kind: "volume\n", Name: "v", Outcome: ledger.Removed}
	if s := odd.String(); !strings.HasPrefix(s, "volume") || strings.Contains(s, "\n") {
		t.Errorf("an item of a kind the sweep does not know: %q, want its kind, cleaned", s)
	}
}

// A rejected line is the ledger's, field for field, and prints alike.
func TestRejectedLine(t *testing.T) {
	in := iledger.Rejected{File: "0badc0de.sandboxes", Line: 3, Excerpt: `"--rm"`, Length: 4}
	if got := RejectedLine(in); got.String() != in.String() {
		t.Errorf("%q, want %q", got, in)
	}
}

// A Report that no sweep made (a zero value, one built by hand) counts
// nothing, is clean, and prints its header without a panic.
func TestZeroReport(t *testing.T) {
	var r Report
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil || !strings.HasPrefix(b.String(), "sweep of ") {
		t.Errorf("WriteTo: %q, %v", b.String(), err)
	}
	if r.Count(Reaped) != 0 || !r.Clean() {
		t.Errorf("zero report: count %d, clean %v", r.Count(Reaped), r.Clean())
	}
	if fromInternal(nil) != nil {
		t.Error("no report from the sweep became one")
	}
}
