package reaper

import (
	"io"
	"strings"
	"time"

	iledger "github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/termtext"
	"github.com/rightsize/rightsize-go/ledger"
)

// A Report is what a [Sweep] decided for each run, and why. Its counts
// cover every run the sweep decided about; [Report.WriteTo] prints it as
// `rightsize sweep` does.
type Report struct {
	// CacheDir is the ledger's folder; Backend and Endpoint the backend
	// and engine swept ("docker", "unix:///var/run/docker.sock").
	CacheDir string
	Backend  string
	Endpoint string
	// DryRun: nothing was touched ([DryRun]).
	DryRun bool
	// Runs are the runs the sweep decided about with the lowest run ids
	// (at most 1000), in run id order.
	Runs []RunReport
	// Seen is how many runs the sweep decided about; Omitted how many of
	// them Runs does not hold.
	Seen, Omitted int
	// Unfinished says why the sweep stopped before the end (its budget was
	// spent, its context ended): the runs it did not reach stay for a
	// later sweep.
	Unfinished string
	// Lapsed are the runs whose claim the engine held and nobody renewed
	// (a Kubernetes run's Lease): dead wherever their owner ran, their
	// claim was dropped (would be, in a dry run), and the engine removes
	// what it owned. LapseProblem is why that could not be finished.
	Lapsed       []string
	LapseProblem string
	// Late are runs reaped earlier, within a couple of minutes, of which
	// the engine showed, by their label, something made after: a create
	// their owner sent before it died, which the engine answered late.
	// What was found is removed, with a fate of its own.
	Late []RunReport
	// TempsRemoved counts the temporary files of killed writers deleted.
	TempsRemoved int
	// Took is how long the sweep took.
	Took time.Duration

	in *reaper.Report // the sweep's own, for its counts and its printing
}

// A RunReport is what a sweep decided for one run, with what became of
// each of its names.
type RunReport struct {
	ID       string
	Decision Decision
	// Reason is shown to users as is ("dead: no process has pid 4242").
	Reason string
	// Liveness is the owner's, as judged ([ledger.Judge]); its zero value
	// (Unknown, no reason) where the run was left alone before it was
	// judged.
	Liveness ledger.Liveness
	// Owner is the run's record; zero when it could not be read.
	Owner ledger.Record
	// Removed were removed, or were already gone (Item.Outcome says
	// which).
	Removed []Item
	// Kept may still exist, and stay listed for a later sweep.
	Kept []Item
	// NotOwned exist and are not the run's: left running, dropped from
	// its list.
	NotOwned []Item
	// Rejected are the first lines of its lists that are not valid names,
	// never handed to an engine; RejectedCount counts them all.
	Rejected      []RejectedLine
	RejectedCount int
	// Problems are files of the run that were not read or not deleted.
	Problems []string
	// ForMember are files of the run, and lines of its entries file, that
	// no reader here understands (a member's of a later version): the
	// run's record stays with them, for the member that wrote them.
	ForMember []string
	// Refused are files of the run that are not regular files (a FIFO
	// where its lock file should be), which the sweep did not open, and
	// which keep it from being reaped until someone removes them.
	Refused []string
	// Took is how long the run took to reap.
	Took time.Duration
}

// A Decision is what a sweep did with one run. Its words are the ones
// `rightsize sweep` prints.
type Decision string

// The decisions.
const (
	// LeftAlone: the run is not this sweep's to reap (alive, unknown,
	// another backend or engine, this process's own, without a readable
	// record, or claimed by another sweeper). Nothing of it was removed.
	LeftAlone Decision = "left alone"
	// Reaped: everything the run listed is gone, and so are its files.
	Reaped Decision = "reaped"
	// KeptBack: the run was reaped, but some names could not be removed
	// (or its lists could not be read); they stay listed, with the record,
	// for a later sweep. Its word is "kept".
	KeptBack Decision = "kept"
	// WouldReap: a dry run found the run reapable and touched nothing.
	WouldReap Decision = "would reap"
)

// An Item is one sandbox, network or local process of a run, and what
// became of it.
type Item struct {
	// Kind is "sandbox", "network" or "process".
	Kind string
	// ID is the engine's id of a sandbox or network, or a process's pid,
	// where known.
	ID      string
	Name    string
	Outcome ledger.Outcome
	// Note says why, for what was kept or is not the run's.
	Note string
}

// String is the item for a terminal, as [Report.WriteTo] prints it: its
// name and note cleaned of what could forge a line.
func (it Item) String() string {
	in := it.internal()
	return termtext.Clean(it.Kind) + strings.TrimPrefix(in.String(), in.Kind.String())
}

func (it Item) internal() reaper.Item {
	in := reaper.Item{ID: it.ID, Name: it.Name, Outcome: it.Outcome, Note: it.Note}
	for _, k := range names.Kinds {
		if k.String() == it.Kind {
			in.Kind = k
		}
	}
	return in
}

// A RejectedLine is a line of a run's list that is not a valid name. It is
// reported, and never handed to anything that runs a command.
type RejectedLine struct {
	File string // base name of the list
	Line int    // 1-based line number
	// Excerpt is the start of the line, quoted with strconv.Quote so that
	// control characters and invalid UTF-8 cannot reach a terminal raw.
	Excerpt string
	Length  int // length of the whole line in bytes
}

// String is the line as a report prints it: where, how long, and its
// excerpt.
func (r RejectedLine) String() string { return iledger.Rejected(r).String() }

// Count returns how many runs got decision d, of every run the sweep
// decided about.
func (r *Report) Count(d Decision) int {
	if r.in == nil {
		return 0
	}
	return r.in.Count(reaper.Decision(d))
}

// Clean reports whether nothing was kept back: every reapable run was
// reaped completely, and the sweep finished.
func (r *Report) Clean() bool { return r.in == nil || r.in.Clean() }

// Run returns the report for run id, if [Report].Runs holds it.
func (r *Report) Run(id string) (RunReport, bool) {
	for _, rr := range r.Runs {
		if rr.ID == id {
			return rr, true
		}
	}
	return RunReport{}, false
}

// WriteTo writes the report for people, as the sweep made it: one line per
// run, then one indented line per sandbox, network or process. Every text
// that came from a file or an engine is cleaned for a terminal.
func (r *Report) WriteTo(w io.Writer) (int64, error) {
	in := r.in
	if in == nil {
		in = &reaper.Report{CacheDir: r.CacheDir, Backend: r.Backend, Endpoint: r.Endpoint, DryRun: r.DryRun}
	}
	return in.WriteTo(w)
}

// fromInternal is the one conversion from the sweep's report.
func fromInternal(in *reaper.Report) *Report {
	if in == nil {
		return nil
	}
	r := &Report{
		CacheDir: in.CacheDir, Backend: in.Backend, Endpoint: in.Endpoint, DryRun: in.DryRun,
		Seen: in.Seen, Omitted: in.Omitted, Unfinished: in.Unfinished,
		Lapsed: in.Lapsed, LapseProblem: in.LapseProblem, TempsRemoved: in.TempsRemoved, Took: in.Took,
		in: in,
	}
	for _, rr := range in.Runs {
		r.Runs = append(r.Runs, runReport(rr))
	}
	for _, rr := range in.Late {
		r.Late = append(r.Late, runReport(rr))
	}
	return r
}

// runReport is one run's report of the sweep's own.
func runReport(rr reaper.RunReport) RunReport {
	out := RunReport{
		ID: rr.ID, Decision: Decision(rr.Decision), Reason: rr.Reason, Liveness: rr.Liveness, Owner: rr.Owner,
		Removed: items(rr.Removed), Kept: items(rr.Kept), NotOwned: items(rr.NotOwned),
		RejectedCount: rr.RejectedCount, Problems: rr.Problems, ForMember: rr.ForMember, Refused: rr.Refused, Took: rr.Took,
	}
	for _, rj := range rr.Rejected {
		out.Rejected = append(out.Rejected, RejectedLine(rj))
	}
	return out
}

func items(in []reaper.Item) []Item {
	var out []Item
	for _, it := range in {
		out = append(out, Item{Kind: it.Kind.String(), ID: it.ID, Name: it.Name, Outcome: it.Outcome, Note: it.Note})
	}
	return out
}
