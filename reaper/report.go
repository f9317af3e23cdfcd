package reaper

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/termtext"
	"github.com/rightsize/rightsize-go/ledger"
)

// Decision is what a sweep did with one run.
type Decision string

const (
	// LeftAlone: the run is not this sweep's to reap (alive, unknown,
	// another backend or engine, this process's own, without a readable
	// record, or claimed by another sweeper). Nothing was touched.
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

// Outcome is what became of one listed name.
type Outcome string

const (
	// Removed: the engine removed it.
	Removed Outcome = "removed"
	// AlreadyGone: the engine had nothing of that name.
	AlreadyGone Outcome = "already gone"
	// NotOwned: something of that name exists that is not the run's (no
	// label of the run, or a keep-alive sandbox): left running, its name
	// dropped from the run's list.
	NotOwned Outcome = "not this run's"
	// KeptBack: it may still exist (the engine did not answer, a network
	// still in use): its name stays listed for a later sweep.
	KeptBack Outcome = "kept"
	// Escaped: a local process of the run that left its session: not
	// signalled, its line stays listed.
	Escaped Outcome = "escaped"
	// LeftForMember: a network of another member's run that carries no
	// run label (the other members label only their containers): never
	// removed by Go, its line stays listed for that member's own sweep.
	// It alone does not make a sweep unclean.
	LeftForMember Outcome = "left for its member's sweep"
	// WouldRemove: a dry run would have asked for its removal.
	WouldRemove Outcome = "would be removed"
)

// Item is one sandbox or network a sweep removed, kept, left alone as not
// the run's, or would remove.
type Item struct {
	Kind    names.Kind
	Name    string
	Outcome Outcome
	// Note says why, for what was kept or not the run's.
	Note string
}

// String is the item for a terminal: its name and note are cleaned
// (termtext), so a name from a ledger file forges no line.
func (it Item) String() string {
	s := it.Kind.String() + " " + termtext.Clean(it.Name) + ": " + string(it.Outcome)
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
	// Refused are files of the run that are not regular files (a FIFO
	// squatting its lock file's name), which the sweep did not open, and
	// which keep it from being reaped until someone removes them.
	Refused []string
	// Took is how long the run took to reap.
	Took time.Duration
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
	forMember     int // kept runs that keep only LeftForMember networks
	// Unfinished says why the sweep stopped before the end (its time budget
	// was spent, its context ended): the runs it did not reach stay for a
	// later sweep.
	Unfinished string
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
func (r *Report) Clean() bool { return r.Count(Kept) == r.forMember && r.Unfinished == "" }

// onlyLeftForMember reports whether all a kept run keeps is another
// member's networks, left for that member's sweep.
func (rr RunReport) onlyLeftForMember() bool {
	if len(rr.Kept) == 0 || len(rr.Problems) > 0 {
		return false
	}
	for _, it := range rr.Kept {
		if it.Outcome != LeftForMember {
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
	return r.Count(Reaped)+r.Count(Kept)+r.Count(WouldReap) > 0 || r.Unfinished != ""
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
	for _, rr := range r.Runs {
		fmt.Fprintf(&b, "  %s  %s  %s\n", termtext.Clean(rr.ID), rr.Decision, termtext.Clean(rr.Reason))
		for _, it := range rr.Removed {
			fmt.Fprintf(&b, "      - %s\n", it)
		}
		for _, it := range rr.NotOwned {
			fmt.Fprintf(&b, "      ~ %s\n", it)
		}
		for _, it := range rr.Kept {
			mark := "!"
			if it.Outcome == LeftForMember {
				mark = "~"
			}
			fmt.Fprintf(&b, "      %s %s\n", mark, it)
		}
		for _, rj := range rr.Rejected {
			fmt.Fprintf(&b, "      ! %s\n", termtext.Clean(rj.String()))
		}
		if more := rr.RejectedCount - len(rr.Rejected); more > 0 {
			fmt.Fprintf(&b, "      ! and %d more rejected lines\n", more)
		}
		for _, p := range rr.Problems {
			fmt.Fprintf(&b, "      ! %s\n", termtext.Clean(p))
		}
		for _, p := range rr.Refused {
			fmt.Fprintf(&b, "      ! refused: %s\n", termtext.Clean(p))
		}
	}
	if r.Omitted > 0 {
		fmt.Fprintf(&b, "  … and %d more runs, counted above\n", r.Omitted)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}
