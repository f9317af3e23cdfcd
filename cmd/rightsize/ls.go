package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/termtext"
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
	Tests      []lsTest     `json:"tests"`

	age time.Duration
}

// lsTest is which test made one of a run's names, as its origins say.
type lsTest struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Test  string `json:"test"`
	Place string `json:"place"`
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
	keepAlive := fs.Bool("keep-alive", false, "")
	fates := fs.Bool("fates", false, "")
	leases := fs.Bool("leases", false, "")
	keepers := fs.Bool("keepers", false, "")
	cacheFlag := fs.String("cache", "", "")
	if stop, err := c.parse("ls", fs, args, 0); stop {
		return err
	}
	cache, err := cacheDir(*cacheFlag)
	if err != nil {
		return err
	}
	// One buffer for the whole output: a table of 200,000 runs is written
	// cell by cell, and stdout is not buffered.
	w := bufio.NewWriterSize(c.stdout, 64<<10)
	given := 0
	for _, b := range []bool{*fates, *keepAlive, *leases, *keepers} {
		if b {
			given++
		}
	}
	switch {
	case given > 1:
		return &exitError{code: exitUsage, msg: "ls: --fates, --keep-alive, --leases and --keepers list different things: give one"}
	case *keepers:
		err = c.lsKeepers(w, *asJSON)
	case *leases:
		err = c.lsLeases(w, *asJSON)
	case *fates:
		err = lsFates(w, cache, *asJSON)
	case *keepAlive:
		err = c.lsKeepAlive(w, cache, *asJSON)
	default:
		err = c.lsRuns(w, cache, *asJSON, *verbose)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// lsRuns lists the runs, one at a time as the folder is read: memory holds
// the table's text, not every run's record (and, with -v, their names).
// The table is followed by the keep-alive sandboxes; the JSON array is
// only the runs, as it always was.
func (c *cli) lsRuns(w *bufio.Writer, cache string, asJSON, verbose bool) error {
	scan, err := ledger.ScanRuns(cache)
	if err != nil {
		return err
	}
	now := time.Now()
	if asJSON {
		return writeRunsJSON(w, scan, now)
	}
	t := c.runTable()
	// -v: each run's names, as text, printed after the table.
	var names bytes.Buffer
	err = scan.EachAhead(false, func(rf ledger.RunFiles) error {
		r := describeRun(rf, now)
		c.runRow(t, r)
		if verbose {
			runNames(&names, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if t.len() == 1 {
		fmt.Fprintf(w, "no runs in %s\n", termtext.Clean(cache))
	} else if err := t.write(w); err != nil {
		return err
	}
	w.Write(names.Bytes())
	if fs, err := ledger.ReadFates(cache); err == nil && len(fs) > 0 {
		fmt.Fprintf(w, "\n%d ended runs have a fate (what became of them): rightsize ls --fates\n", len(fs))
	}
	fmt.Fprintln(w)
	if err := c.lsKeepAliveTable(w, cache); err != nil {
		return err
	}
	return c.lsKeepersTable(w)
}

// writeRunsJSON writes the runs as one JSON array, exactly as an encoder
// indenting by two spaces would, one run at a time.
func writeRunsJSON(w *bufio.Writer, scan *ledger.Scan, now time.Time) error {
	first := true
	err := scan.EachAhead(false, func(rf ledger.RunFiles) error {
		b, err := json.MarshalIndent(describeRun(rf, now), "  ", "  ")
		if err != nil {
			return err
		}
		if first {
			w.WriteString("[\n  ")
			first = false
		} else {
			w.WriteString(",\n  ")
		}
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	if first {
		_, err = w.WriteString("[]\n")
	} else {
		_, err = w.WriteString("\n]\n")
	}
	return err
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
	r := lsRun{ID: rf.ID, Writer: "unknown", Sandboxes: []string{}, Networks: []string{}, Rejected: []lsRejected{}, Problems: []string{}, Tests: []lsTest{}}
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
	if !rf.HasLines() {
		// Nothing to read: no open of three files that are not there, for
		// each of 200,000 runs.
		r.Problems = append(r.Problems, rf.Problems...)
		return r
	}
	l := rf.ReadLists()
	r.Sandboxes = append(r.Sandboxes, l.Sandboxes...)
	r.Networks = append(r.Networks, l.Networks...)
	for _, rj := range l.Rejected {
		r.Rejected = append(r.Rejected, lsRejected{File: rj.File, Line: rj.Line, Excerpt: rj.Excerpt, Length: rj.Length})
	}
	r.Problems = append(r.Problems, rf.Problems...)
	r.Problems = append(r.Problems, l.Problems...)
	if len(r.Sandboxes)+len(r.Networks) > 0 {
		// Only a run that lists names has origins worth a look: no open
		// of a file that is not there, for each of 200,000 runs.
		og := ledger.ReadOrigins(filepath.Dir(rf.Dir), rf.ID)
		for _, k := range []ledger.Kind{ledger.SandboxKind, ledger.NetworkKind} {
			for _, n := range l.Of(k) {
				if o := og.Of(k, n); !o.IsZero() {
					r.Tests = append(r.Tests, lsTest{Kind: k.String(), Name: n, Test: o.Test, Place: o.Place})
				}
			}
		}
	}
	return r
}

// testOf is what made name of kind k, as r's origins say; "" when not
// known.
func (r lsRun) testOf(k, name string) string {
	for _, t := range r.Tests {
		if t.Kind == k && t.Name == name {
			return origin.Origin{Test: t.Test, Place: t.Place}.String()
		}
	}
	return ""
}

// testsCell is the TESTS cell of a run: the first test that made one of
// its names, and how many others; "-" when none is known.
func testsCell(r lsRun) string {
	var tests []string
	for _, t := range r.Tests {
		if !slices.Contains(tests, t.Test) {
			tests = append(tests, t.Test)
		}
	}
	switch len(tests) {
	case 0:
		return "-"
	case 1:
		return termtext.Quote(termtext.Clip(tests[0], 48))
	}
	return termtext.Quote(termtext.Clip(tests[0], 48)) + " +" + strconv.Itoa(len(tests)-1)
}

func (c *cli) lsTable(w io.Writer, rows []lsRun) {
	t := c.runTable()
	for _, r := range rows {
		c.runRow(t, r)
	}
	t.write(w)
}

// runTable starts the runs table with its header.
func (c *cli) runTable() *table {
	t := &table{}
	t.row("RUN", "WRITER", "BACKEND", "ENDPOINT", "PID", c.paint(sgrDefault, "STATUS"), "AGE", "SANDBOXES", "NETWORKS", "TESTS", "REASON")
	return t
}

func (c *cli) runRow(t *table, r lsRun) {
	pid, backend, why := "-", dash(r.Backend), r.Reason
	if r.PID != 0 {
		pid = strconv.Itoa(r.PID)
	}
	if r.Status == statusUnreadable {
		why = r.Error
	}
	t.row(termtext.Quote(r.ID), termtext.Quote(r.Writer), termtext.Quote(backend), termtext.Quote(dash(docker.SpokenEndpoint(r.Endpoint))), pid,
		c.paint(statusColour(r.Status), r.Status), formatAge(r), strconv.Itoa(len(r.Sandboxes)), strconv.Itoa(len(r.Networks)), testsCell(r), oneLine(why))
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
		runNames(w, r)
	}
}

// runNames writes one run's part of lsNames.
func runNames(w io.Writer, r lsRun) {
	fmt.Fprintf(w, "\n%s\n", termtext.Quote(r.ID))
	if len(r.Sandboxes)+len(r.Networks)+len(r.Rejected)+len(r.Problems) == 0 {
		fmt.Fprintln(w, "  (no names)")
	}
	for _, k := range []struct {
		kind  string
		names []string
	}{{"sandbox", r.Sandboxes}, {"network", r.Networks}} {
		for _, n := range k.names {
			by := ""
			if t := r.testOf(k.kind, n); t != "" {
				by = "  made by " + termtext.Clean(t)
			}
			fmt.Fprintf(w, "  %-7s  %s%s\n", k.kind, termtext.Quote(n), by)
		}
	}
	for _, rj := range r.Rejected {
		// The excerpt is already quoted by the ledger.
		fmt.Fprintf(w, "  rejected %s:%d: %d-byte line %s\n", termtext.Quote(rj.File), rj.Line, rj.Length, termtext.Clean(rj.Excerpt))
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  problem  %s\n", oneLine(p))
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
	return formatDuration(r.age)
}

// formatDuration is a duration as ls shows ages.
func formatDuration(d time.Duration) string {
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
