package reaper

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

// Decision is what a sweep did with one run.
type Decision string

const (
	// LeftAlone: the run is not this sweep's to reap (alive, unknown,
	// another backend or engine, this process's own, without a readable
	// record, or claimed by another sweeper). Nothing was touched, but
	// that another member's record was kept as Go's copy
	// (ledger.RunFiles.Remember).
	LeftAlone Decision = "left alone"
	// Reaped: everything the run listed is gone, and so are its files.
	Reaped Decision = "reaped"
	// Kept: the run was reaped, but some names could not be removed (or its
	// lists could not be read); they stay listed, with the record, for a
	// later sweep.
	Kept Decision = "kept"
	// WouldReap: a dry run found the run reapable and touched nothing.
	WouldReap Decision = "would reap"
)

// Item is one sandbox or network a sweep removed, kept, left alone as not
// the run's, or would remove.
type Item struct {
	Kind names.Kind
	// ID is the engine's id of a sandbox or network, or a process's pid,
	// where known.
	ID      string
	Name    string
	Outcome ledger.Outcome
	// Note says why, for what was kept or not the run's.
	Note string
	// err is the engine's answer, for what was kept.
	err error
}

// cause is the engine's answer that kept it, or its note.
func (it Item) cause() error {
	if it.err != nil {
		return it.err
	}
	return errors.New(it.Note)
}

// String is the item for a terminal: its name and note are cleaned
// (termtext), so a name from a ledger file forges no line.
func (it Item) String() string {
	name := termtext.Clean(it.Name)
	if it.Kind == names.ProcessKind && it.ID != "" {
		name = termtext.Clean(it.ID) + " (" + name + ")"
	}
	s := it.Kind.String() + " " + name + ": " + string(it.Outcome)
	if it.Note != "" {
		s += " (" + termtext.Clean(it.Note) + ")"
	}
	return s
}

// RunReport is what a sweep decided for one run, and why.
type RunReport struct {
	ID       string
	Decision Decision
	// Reason is shown to users as is ("dead: no process has pid 4242").
	Reason string
	// Liveness is the owner's, as judged; its zero value (Unknown, no
	// reason) where the run was left alone before it was judged.
	Liveness ledger.Liveness
	// Owner is the run's record; zero when it could not be read.
	Owner ledger.Record
	// Removed: removed, or already gone (Outcome says which).
	Removed []Item
	// Kept: may still exist; still listed.
	Kept []Item
	// NotOwned: exists, not the run's; left running, dropped from the list.
	NotOwned []Item
	// Rejected lines of its lists (the first few), and how many there were.
	Rejected      []ledger.Rejected
	RejectedCount int
	// Problems are files of the run that were not read or not deleted.
	Problems []string
	// ForMember are files of the run, and lines of its entries file, that
	// no reader here understands (a member's of a later version): the
	// run's record stays with them, for the member that wrote them. Alone
	// they do not make a sweep unclean.
	ForMember []string
	// Refused are files of the run that are not regular files (a FIFO
	// squatting its lock file's name), which the sweep did not open, and
	// which keep it from being reaped until someone removes them.
	Refused []string
	// Took is how long the run took to reap.
	Took time.Duration
}

// fileItems sorts items into rr's lists, the one rule every reaping's
// report follows: gone, forgotten or (in a dry run) to be removed is
// Removed, another's is NotOwned, anything else may still exist and is
// Kept.
func fileItems(rr *RunReport, items []Item) {
	for _, it := range items {
		switch {
		case it.Outcome.Gone(), it.Outcome == ledger.Forgotten, it.Outcome == ledger.WouldRemove:
			rr.Removed = append(rr.Removed, it)
		case it.Outcome == ledger.NotOwned:
			rr.NotOwned = append(rr.NotOwned, it)
		default:
			rr.Kept = append(rr.Kept, it)
		}
	}
}

// maxRunReports bounds how many runs a Report holds one by one: a folder
// of 200,000 dead runs is counted, not held in memory.
const maxRunReports = 1000

// Report is the outcome of one sweep.
type Report struct {
	CacheDir string
	Backend  string
	Endpoint string
	DryRun   bool
	// Runs are the runs the sweep decided about with the lowest run ids
	// (at most 1000), in run id order; the counts cover every one.
	Runs []RunReport
	// Seen is how many runs the sweep decided about; Omitted how many of
	// them Runs does not hold.
	Seen, Omitted int
	counts        map[Decision]int
	forMember     int // kept runs that keep only ledger.LeftForMember networks
	// Unfinished says why the sweep stopped before the end (its time budget
	// was spent, its context ended): the runs it did not reach stay for a
	// later sweep.
	Unfinished string
	// Lapsed are the runs whose claim the engine held and nobody renewed
	// (backend.LapseSweeper): dead wherever their owner ran, their claim
	// was dropped (would be, in a dry run), and the engine removes what
	// it owned. LapseProblem is why that could not be finished.
	Lapsed       []string
	LapseProblem string
	// KeepAlives are the keep-alive sandboxes found idle past their
	// time-to-live (RIGHTSIZE_REUSE_TTL, Spec.ReuseTTL): removed, kept
	// (a process took it during the sweep; a removal failed), or that
	// would be removed. KeepAliveProblem says why they could not all be
	// judged.
	KeepAlives       []Item
	KeepAliveProblem string
	// Late are runs reaped earlier (within LateHorizon) of which the
	// engine showed, by their label, something made after: a create their
	// owner sent before it died, answered late. Each says what became of
	// what was found (sweepLate).
	Late []RunReport
	// TempsRemoved counts temporary files of killed writers deleted.
	TempsRemoved int
	Took         time.Duration
}

// add counts rr, and holds it if its id is among the lowest maxRunReports
// seen so far. The sweep goes through runs in the order of their files on
// disk, not of their ids: until the sweep ends (sortRuns), Runs is a heap
// with the highest id held at the top.
func (r *Report) add(rr RunReport) {
	if r.counts == nil {
		r.counts = map[Decision]int{}
	}
	r.counts[rr.Decision]++
	if rr.Decision == Kept && rr.onlyLeftForMember() {
		r.forMember++
	}
	r.Seen++
	switch {
	case len(r.Runs) < maxRunReports:
		r.Runs = append(r.Runs, rr)
		r.up(len(r.Runs) - 1)
	case rr.ID < r.Runs[0].ID:
		r.Runs[0] = rr
		r.down(0)
	}
	r.Omitted = r.Seen - len(r.Runs)
}

func (r *Report) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if r.Runs[p].ID >= r.Runs[i].ID {
			return
		}
		r.Runs[p], r.Runs[i] = r.Runs[i], r.Runs[p]
		i = p
	}
}

func (r *Report) down(i int) {
	for {
		top, l := i, 2*i+1
		if l < len(r.Runs) && r.Runs[l].ID > r.Runs[top].ID {
			top = l
		}
		if l+1 < len(r.Runs) && r.Runs[l+1].ID > r.Runs[top].ID {
			top = l + 1
		}
		if top == i {
			return
		}
		r.Runs[i], r.Runs[top] = r.Runs[top], r.Runs[i]
		i = top
	}
}

// sortRuns puts Runs in run id order, once the sweep has ended.
func (r *Report) sortRuns() {
	slices.SortFunc(r.Runs, func(a, b RunReport) int { return strings.Compare(a.ID, b.ID) })
}

// Clean reports whether nothing was kept back: every reapable run was
// reaped completely, and the sweep finished.
func (r *Report) Clean() bool {
	for _, it := range r.KeepAlives {
		if it.err != nil {
			return false
		}
	}
	for _, rr := range r.Late {
		if len(rr.Kept) > 0 {
			return false
		}
	}
	return r.Count(Kept) == r.forMember && r.Unfinished == "" && r.LapseProblem == ""
}

// onlyLeftForMember reports whether all a kept run keeps is another
// member's networks, left for that member's sweep.
func (rr RunReport) onlyLeftForMember() bool {
	if len(rr.Kept)+len(rr.ForMember) == 0 || len(rr.Problems) > 0 {
		return false
	}
	for _, it := range rr.Kept {
		if it.Outcome != ledger.LeftForMember {
			return false
		}
	}
	return true
}

// Count returns how many runs got decision d.
func (r *Report) Count(d Decision) int { return r.counts[d] }

// Acted reports whether the sweep removed or kept anything (what a test
// log should hear about); false when every run was left alone.
func (r *Report) Acted() bool {
	return r.Count(Reaped)+r.Count(Kept)+r.Count(WouldReap) > 0 || r.Unfinished != "" || len(r.Lapsed) > 0 || r.LapseProblem != "" ||
		len(r.KeepAlives) > 0 || r.KeepAliveProblem != "" || len(r.Late) > 0
}

// Run returns the report for run id, if the sweep holds it.
func (r *Report) Run(id string) (RunReport, bool) {
	for _, rr := range r.Runs {
		if rr.ID == id {
			return rr, true
		}
	}
	return RunReport{}, false
}

// WriteTo writes the report for people: one line per run, then one
// indented line per sandbox or network. Every text that came from a file
// or an engine is cleaned for a terminal (termtext).
func (r *Report) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	ep := termtext.Clean(r.Endpoint)
	if ep == "" {
		ep = "-"
	}
	cache := termtext.Clean(r.CacheDir)
	runs := "runs"
	if r.Seen == 1 {
		runs = "run"
	}
	if r.DryRun {
		fmt.Fprintf(&b, "sweep of %s for %s at %s (dry run: nothing touched): %d %s, %d would be reaped, %d left alone, in %s\n",
			cache, termtext.Clean(r.Backend), ep, r.Seen, runs, r.Count(WouldReap), r.Count(LeftAlone), r.Took.Round(time.Millisecond))
	} else {
		fmt.Fprintf(&b, "sweep of %s for %s at %s: %d %s, %d reaped, %d kept back, %d left alone, in %s\n",
			cache, termtext.Clean(r.Backend), ep, r.Seen, runs, r.Count(Reaped), r.Count(Kept), r.Count(LeftAlone), r.Took.Round(time.Millisecond))
	}
	if r.Unfinished != "" {
		fmt.Fprintf(&b, "  ! stopped early: %s; what it did not reach stays for a later sweep\n", termtext.Clean(r.Unfinished))
	}
	if len(r.Lapsed) > 0 {
		verb := "dropped"
		if r.DryRun {
			verb = "would be dropped"
		}
		fmt.Fprintf(&b, "  lapsed run claims %s (the engine removes what they own): %s\n", verb, termtext.Clean(strings.Join(r.Lapsed, ", ")))
	}
	if r.LapseProblem != "" {
		fmt.Fprintf(&b, "  ! lapsed run claims: %s\n", termtext.Clean(r.LapseProblem))
	}
	for _, rr := range r.Runs {
		rr.writeTo(&b)
	}
	if r.Omitted > 0 {
		fmt.Fprintf(&b, "  … and %d more runs, counted above\n", r.Omitted)
	}
	if len(r.KeepAlives) > 0 {
		b.WriteString("  keep-alive sandboxes idle past their time-to-live:\n")
	}
	for _, it := range r.KeepAlives {
		mark := "-"
		switch {
		case it.err != nil:
			mark = "!"
		case it.Outcome == ledger.Kept:
			mark = "="
		}
		fmt.Fprintf(&b, "      %s %s\n", mark, it)
	}
	if r.KeepAliveProblem != "" {
		fmt.Fprintf(&b, "  ! keep-alive sandboxes: %s\n", termtext.Clean(r.KeepAliveProblem))
	}
	if len(r.Late) > 0 {
		b.WriteString("  made after their runs were reaped (creates the engine answered late):\n")
	}
	for _, rr := range r.Late {
		rr.writeTo(&b)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// writeTo writes rr for people: its line, then one indented line per
// sandbox, network, process or file.
func (rr RunReport) writeTo(b *strings.Builder) {
	fmt.Fprintf(b, "  %s  %s  %s\n", termtext.Clean(rr.ID), rr.Decision, termtext.Clean(rr.Reason))
	for _, it := range rr.Removed {
		fmt.Fprintf(b, "      - %s\n", it)
	}
	for _, it := range rr.NotOwned {
		fmt.Fprintf(b, "      ~ %s\n", it)
	}
	for _, it := range rr.Kept {
		mark := "!"
		if it.Outcome == ledger.LeftForMember {
			mark = "~"
		}
		fmt.Fprintf(b, "      %s %s\n", mark, it)
	}
	for _, rj := range rr.Rejected {
		fmt.Fprintf(b, "      ! %s\n", termtext.Clean(rj.String()))
	}
	if more := rr.RejectedCount - len(rr.Rejected); more > 0 {
		fmt.Fprintf(b, "      ! and %d more rejected lines\n", more)
	}
	for _, f := range rr.ForMember {
		fmt.Fprintf(b, "      ~ %s: not understood here; left, with the run's record, for the member that wrote it\n", termtext.Clean(f))
	}
	for _, p := range rr.Problems {
		fmt.Fprintf(b, "      ! %s\n", termtext.Clean(p))
	}
	for _, p := range rr.Refused {
		fmt.Fprintf(b, "      ! refused: %s\n", termtext.Clean(p))
	}
}
