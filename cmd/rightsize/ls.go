package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/rightsize/rightsize-go/ledger"
)

// lsRun is one run as `rightsize ls --json` prints it. The field names are
// part of the command's contract (see `rightsize help ls`): add, never
// rename.
type lsRun struct {
	ID         string       `json:"id"`
	Writer     string       `json:"writer"`
	Backend    string       `json:"backend"`
	Endpoint   string       `json:"endpoint"`
	MsbPath    string       `json:"msbPath"`
	PID        int          `json:"pid"`
	StartedISO string       `json:"startedIso"`
	Status     string       `json:"status"`
	Reason     string       `json:"reason"`
	Error      string       `json:"error"`
	Modified   string       `json:"modified"`
	AgeSeconds int64        `json:"ageSeconds"`
	Sandboxes  []string     `json:"sandboxes"`
	Networks   []string     `json:"networks"`
	Rejected   []lsRejected `json:"rejected"`
	Problems   []string     `json:"problems"`

	age time.Duration
}

type lsRejected struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Excerpt string `json:"excerpt"`
	Length  int    `json:"length"`
}

// statusUnreadable is the status of a run whose record cannot be used.
const statusUnreadable = "unreadable"

func (c *cli) ls(args []string) error {
	fs := newFlags("ls")
	asJSON := fs.Bool("json", false, "")
	verbose := fs.Bool("v", false, "")
	cacheFlag := fs.String("cache", "", "")
	if stop, err := c.parse("ls", fs, args, 0); stop {
		return err
	}
	cache, err := cacheDir(*cacheFlag)
	if err != nil {
		return err
	}
	runs, err := ledger.ListRuns(cache)
	if err != nil {
		return err
	}
	now := time.Now()
	rows := make([]lsRun, 0, len(runs))
	for _, rf := range runs {
		rows = append(rows, describeRun(rf, now))
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(c.stdout, "no runs in %s\n", termSafe(cache))
		return nil
	}
	c.lsTable(rows)
	if *verbose {
		c.lsNames(c.stdout, rows)
	}
	return nil
}

// cacheDir is --cache when given, else the ledger's cache dir.
func cacheDir(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	return ledger.Dir()
}

// describeRun reads what ls shows of one run: its record, its owner's
// liveness, its lists.
func describeRun(rf ledger.RunFiles, now time.Time) lsRun {
	r := lsRun{ID: rf.ID, Writer: "unknown", Sandboxes: []string{}, Networks: []string{}, Rejected: []lsRejected{}, Problems: []string{}}
	if !rf.ModTime.IsZero() {
		r.Modified = rf.ModTime.UTC().Format(time.RFC3339Nano)
		r.age = max(rf.Age(now), 0)
		r.AgeSeconds = int64(r.age / time.Second)
	}
	if rf.RecordErr != nil {
		r.Status = statusUnreadable
		r.Error = rf.RecordErr.Error()
		if errors.Is(rf.RecordErr, ledger.ErrNoRecord) {
			r.Error = "no record file: only line files"
		}
	} else {
		rec := rf.Record
		if rec.Writer != "" {
			r.Writer = rec.Writer
		}
		r.Backend, r.Endpoint, r.MsbPath = rec.Backend, rec.Endpoint, rec.MsbPath
		r.PID, r.StartedISO = rec.PID, rec.StartedISO
		lv := ledger.Judge(rec)
		r.Status, r.Reason = lv.State.String(), lv.Reason
	}
	l := rf.ReadLists()
	r.Sandboxes = append(r.Sandboxes, l.Sandboxes...)
	r.Networks = append(r.Networks, l.Networks...)
	for _, rj := range l.Rejected {
		r.Rejected = append(r.Rejected, lsRejected{File: rj.File, Line: rj.Line, Excerpt: rj.Excerpt, Length: rj.Length})
	}
	r.Problems = append(r.Problems, rf.Problems...)
	r.Problems = append(r.Problems, l.Problems...)
	return r
}

func (c *cli) lsTable(rows []lsRun) {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "RUN\tWRITER\tBACKEND\tENDPOINT\tPID\t%s\tAGE\tSANDBOXES\tNETWORKS\tREASON\n", c.paint(sgrDefault, "STATUS"))
	for _, r := range rows {
		pid, backend, why := "-", dash(r.Backend), r.Reason
		if r.PID != 0 {
			pid = strconv.Itoa(r.PID)
		}
		if r.Status == statusUnreadable {
			why = r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n",
			quoteIfNeeded(r.ID), quoteIfNeeded(r.Writer), quoteIfNeeded(backend), quoteIfNeeded(dash(r.Endpoint)), pid,
			c.paint(statusColour(r.Status), r.Status), formatAge(r), len(r.Sandboxes), len(r.Networks), oneLine(why))
	}
	tw.Flush()
}

func statusColour(status string) string {
	switch status {
	case "alive":
		return sgrGreen
	case "dead":
		return sgrRed
	case statusUnreadable:
		return sgrYellow
	default:
		return sgrDefault
	}
}

// lsNames prints, after the table, every run's names, rejected lines and
// problems (-v).
func (c *cli) lsNames(w io.Writer, rows []lsRun) {
	for _, r := range rows {
		fmt.Fprintf(w, "\n%s\n", quoteIfNeeded(r.ID))
		if len(r.Sandboxes)+len(r.Networks)+len(r.Rejected)+len(r.Problems) == 0 {
			fmt.Fprintln(w, "  (no names)")
		}
		for _, n := range r.Sandboxes {
			fmt.Fprintf(w, "  sandbox  %s\n", quoteIfNeeded(n))
		}
		for _, n := range r.Networks {
			fmt.Fprintf(w, "  network  %s\n", quoteIfNeeded(n))
		}
		for _, rj := range r.Rejected {
			// The excerpt is already quoted by the ledger.
			fmt.Fprintf(w, "  rejected %s:%d: %d-byte line %s\n", quoteIfNeeded(rj.File), rj.Line, rj.Length, termSafe(rj.Excerpt))
		}
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  problem  %s\n", oneLine(p))
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatAge is short and exact enough for a glance: 42s, 5m07s, 3h12m, 2d04h.
func formatAge(r lsRun) string {
	if r.Modified == "" {
		return "-"
	}
	d := r.age
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}
