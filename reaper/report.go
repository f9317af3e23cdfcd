package reaper

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/ledger"
)

// Decision is what a sweep did with one run.
type Decision string

const (
	// LeftAlone: the run is not this sweep's to reap (alive, unknown,
	// another backend or engine, this process's own, fresh and unparseable,
	// or claimed by another sweeper). Nothing was touched.
	LeftAlone Decision = "left alone"
	// Reaped: everything the run listed is gone, and so are its files.
	Reaped Decision = "reaped"
	// Kept: the run was reaped, but some names could not be removed; they
	// stay listed, with the record, for a later sweep.
	Kept Decision = "kept"
	// WouldReap: a dry run found the run reapable and touched nothing.
	WouldReap Decision = "would reap"
)

// Item is one sandbox or network a sweep removed, kept or would remove.
type Item struct {
	Kind string // "sandbox" or "network"
	Name string
	// Note says how it went: "removed", "not found", or why it was kept.
	Note string
}

func (it Item) String() string { return it.Kind + " " + it.Name + ": " + it.Note }

// RunReport is what a sweep decided for one run, and why.
type RunReport struct {
	ID       string
	Decision Decision
	// Reason is shown to users as is ("dead: no process has pid 4242").
	Reason string
	// Owner is the run's record; zero when it could not be read.
	Owner    ledger.Record
	Removed  []Item
	Kept     []Item
	Rejected []ledger.Rejected
	// Problems are files of the run that were not read or not deleted.
	Problems []string
}

// Report is the outcome of one sweep.
type Report struct {
	CacheDir string
	Backend  string
	Endpoint string
	DryRun   bool
	Runs     []RunReport
	Took     time.Duration
}

// Clean reports whether nothing was kept back: every reapable run was
// reaped completely.
func (r *Report) Clean() bool {
	for _, rr := range r.Runs {
		if rr.Decision == Kept {
			return false
		}
	}
	return true
}

// Count returns how many runs got decision d.
func (r *Report) Count(d Decision) int {
	n := 0
	for _, rr := range r.Runs {
		if rr.Decision == d {
			n++
		}
	}
	return n
}

// Run returns the report for run id, if the sweep saw it.
func (r *Report) Run(id string) (RunReport, bool) {
	for _, rr := range r.Runs {
		if rr.ID == id {
			return rr, true
		}
	}
	return RunReport{}, false
}

// WriteTo writes the report for people: one line per run, then one
// indented line per sandbox or network.
func (r *Report) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	ep := r.Endpoint
	if ep == "" {
		ep = "-"
	}
	runs := "runs"
	if len(r.Runs) == 1 {
		runs = "run"
	}
	if r.DryRun {
		fmt.Fprintf(&b, "sweep of %s for %s at %s (dry run: nothing touched): %d %s, %d would be reaped, %d left alone, in %s\n",
			r.CacheDir, r.Backend, ep, len(r.Runs), runs, r.Count(WouldReap), r.Count(LeftAlone), r.Took.Round(time.Millisecond))
	} else {
		fmt.Fprintf(&b, "sweep of %s for %s at %s: %d %s, %d reaped, %d kept back, %d left alone, in %s\n",
			r.CacheDir, r.Backend, ep, len(r.Runs), runs, r.Count(Reaped), r.Count(Kept), r.Count(LeftAlone), r.Took.Round(time.Millisecond))
	}
	for _, rr := range r.Runs {
		fmt.Fprintf(&b, "  %s  %s  %s\n", rr.ID, rr.Decision, rr.Reason)
		for _, it := range rr.Removed {
			fmt.Fprintf(&b, "      - %s\n", it)
		}
		for _, it := range rr.Kept {
			fmt.Fprintf(&b, "      ! kept %s\n", it)
		}
		for _, rj := range rr.Rejected {
			fmt.Fprintf(&b, "      ! %s\n", rj)
		}
		for _, p := range rr.Problems {
			fmt.Fprintf(&b, "      ! %s\n", p)
		}
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}
