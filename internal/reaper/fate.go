package reaper

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

// Who reaped a run, as its fate says.
const (
	ByWatchdog       = "watchdog"
	ByNativeWatchdog = "native watchdog"
	BySweep          = "sweep"
	ByCommand        = "rightsize sweep"
)

// WithFateBy names who the sweep's fates say reaped each run (BySweep by
// default; the command line says ByCommand).
func WithFateBy(by string) Option { return optionFunc(func(c *config) { c.fateBy = by }) }

// sweepFate writes the fate of a run the sweep reaped (or reaped in part),
// when it had anything to tell: a dead run that listed nothing gets none.
func (c *config) sweepFate(rf ledger.RunFiles, rr RunReport, noticed time.Time) {
	if c.dryRun || (rr.Decision != Reaped && rr.Decision != Kept) {
		return
	}
	if len(rr.Removed)+len(rr.Kept)+len(rr.NotOwned) == 0 {
		return
	}
	if len(rr.Removed)+len(rr.NotOwned) == 0 && ledger.HasFate(c.cache, rf.ID) {
		// Kept again, nothing removed: its fate was told already, and a
		// run kept for long must not fill the fates or be told at every
		// start.
		return
	}
	f := ledger.Fate{
		Run:         rf.ID,
		By:          c.fateBy,
		ByPID:       os.Getpid(),
		NoticedISO:  ledger.FormatISO(noticed),
		FinishedISO: ledger.FormatISO(c.now()),
		Owner:       ownerOf(c.cache, rf),
		Note:        rr.Reason,
	}
	if f.By == "" {
		f.By = BySweep
	}
	origins := ledger.ReadOrigins(c.cache, rf.ID)
	for _, list := range [][]Item{rr.Removed, rr.Kept, rr.NotOwned} {
		for _, it := range list {
			f.Items = append(f.Items, fateItem(it, origins))
		}
	}
	if _, err := ledger.WriteFate(c.cache, f, c.now()); err != nil && c.logger != nil {
		c.logger.Warn("fate not written", "run", rf.ID, "err", err)
	}
	os.Remove(ledger.OwnerStubPath(c.cache, rf.ID))
	if rr.Decision == Reaped {
		// What is kept is told again by a later sweep, with its origin.
		_ = ledger.RemoveOrigins(c.cache, rf.ID)
	}
	ledger.RemoveWatchdogMarks(c.cache, rf.ID)
}

// ownerOf is what the run's record, and its owner's stub, say of it.
func ownerOf(cache string, rf ledger.RunFiles) ledger.FateOwner {
	o := ledger.ReadOwnerStub(cache, rf.ID)
	if rf.RecordErr == nil {
		o.PID, o.StartedISO, o.Backend = rf.Record.PID, rf.Record.StartedISO, rf.Record.Backend
		o.StartTicks, o.BootID, o.PidNamespace = rf.Record.StartTicks, rf.Record.BootID, rf.Record.PidNamespace
		if rf.Record.Writer != "" {
			o.Writer = rf.Record.Writer
		}
	}
	return o
}

// fateItem is it as its run's fate tells it, with what made it as the
// run's origins say.
func fateItem(it Item, origins ledger.Origins) ledger.FateItem {
	return ledger.FateItem{Kind: fateKind(it.Kind), ID: it.ID, Name: it.Name, Outcome: it.Outcome, Note: it.Note, Origin: origins.Of(it.Kind, it.Name)}
}

func fateKind(k names.Kind) string { return k.String() }

// OwnerInfo is what this process's fate would say of its owner.
func OwnerInfo(backend string) ledger.FateOwner {
	args := make([]string, 0, len(os.Args))
	for i, a := range os.Args {
		if i == 0 {
			a = filepath.Base(a)
		}
		args = append(args, a)
	}
	return ledger.FateOwner{PID: os.Getpid(), Writer: "go", Command: strings.Join(args, " "), Backend: backend}
}

// Fate is one run's fate as its file holds it, told or not.
type Fate = ledger.FateFile

// OpenSummary opens path, where a CI job's summary is kept, to add fates
// to it: as every file of the cache dir is opened (never through a link
// or into a FIFO that would hold the open for ever).
func OpenSummary(path string) (*os.File, error) {
	return ledger.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
}

// TellEmptyCacheDir tells w, once per process, that RIGHTSIZE_CACHE_DIR is
// set but empty (ledger.EmptyCacheDirNote).
func TellEmptyCacheDir(w io.Writer) { ledger.TellEmptyCacheDir(w) }

// TellNote reports whether note is to be told now: not when a process
// using the session's cache dir told it within ledger.NoteAgainAfter.
func (s *Session) TellNote(note string, now time.Time) bool {
	return ledger.TellNote(s.cache, note, now)
}

// RunAlive reports whether id is a run of the ledger in cache whose record
// names an owner that is alive.
func RunAlive(cache, id string) bool {
	rf, err := ledger.ReadRun(cache, id)
	return err == nil && rf.RecordErr == nil && ledger.Judge(rf.Record).State == ledger.Alive
}

// maxToldFates is how many fates a process tells one by one; the rest
// are counted.
const maxToldFates = 3

// UntoldFates returns the fates of cache no process has told yet, newest
// first, but for own's (this process's run, whose fate is not news to it)
// and for a watchdog's while another watchdog of its run lives: that one
// joins its share to the fate when it is done, and the death is told
// whole, once.
func UntoldFates(cache, own string) []ledger.FateFile {
	fates, err := ledger.ReadUntoldFates(cache)
	if err != nil {
		return nil
	}
	var out []ledger.FateFile
	for _, f := range fates {
		if f.Run == own {
			continue
		}
		if f.Err == nil && byWatchdog(f.Fate) && slices.ContainsFunc(ledger.LiveWatchdogs(cache, f.Run), func(pid int) bool { return pid != f.ByPID }) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// MarkTold marks fates told, so that no later process tells them again,
// and returns those this call marked (a sibling may have marked some
// first).
func MarkTold(fates []ledger.FateFile) []ledger.FateFile {
	var out []ledger.FateFile
	for _, f := range fates {
		if ledger.ClaimTell(f.Path) {
			out = append(out, f)
		}
	}
	return out
}

// FateLines tells fates: a line each for the first few, then how many
// more. One death is one line: the fates a run's two watchdogs wrote of
// it (the script's, of its sandboxes; the native one's, of its local
// processes) are told together.
func FateLines(fates []ledger.FateFile) []string {
	fates = oneDeathOneFate(fates)
	var lines []string
	for i, f := range fates {
		if i == maxToldFates {
			lines = append(lines, fmt.Sprintf("rightsize: and %d more ended runs: rightsize ls --fates", len(fates)-i))
			break
		}
		lines = append(lines, FateLine(f))
	}
	return lines
}

// oneDeathOneFate merges the watchdogs' fates of each run into the first
// of them, in their order (mergeShares). The watchdogs join their shares
// into one fate as they write them (writeNativeFate); two are left only
// where one could not wait for the other's lock. A sweep's fate of the
// same run is another event (what a watchdog kept, reaped later) and stays
// a line of its own.
func oneDeathOneFate(fates []ledger.FateFile) []ledger.FateFile {
	var out []ledger.FateFile
	first := map[string]int{} // run: its watchdog fate's index in out
	for _, f := range fates {
		i, seen := first[f.Run]
		switch {
		case f.Err != nil || !byWatchdog(f.Fate):
		case !seen:
			first[f.Run] = len(out)
		default:
			out[i].Fate = mergeShares(out[i].Fate, f.Fate)
			continue
		}
		out = append(out, f)
	}
	return out
}

// byWatchdog: f was written by a watchdog of its run, of either kind.
func byWatchdog(f ledger.Fate) bool { return f.By == ByWatchdog || f.By == ByNativeWatchdog }

// joinShare is how a watchdog's share of its run's reaping joins the
// fate another watchdog of the run (the script one of its sandboxes, the
// native one of its processes) wrote of the same death: one death, one
// fate. A sweep's fate is another event, and is not joined.
func joinShare(share ledger.Fate) func(old ledger.Fate) (ledger.Fate, bool) {
	return func(old ledger.Fate) (ledger.Fate, bool) {
		if !byWatchdog(old) {
			return old, false
		}
		return mergeShares(old, share), true
	}
}

// mergeShares is one fate of what two watchdogs of a run did at its
// death: a's items, then b's (one item that both tell, the same process
// ended by both, is told once, as the one that acted); noticed when the
// first noticed, finished when the last finished. It is said to be by the
// watchdog that reaped the engine's things (the other ended local
// processes alone), "its watchdog" when the two are of different kinds.
func mergeShares(a, b ledger.Fate) ledger.Fate {
	m := a
	m.Items = slices.Clone(a.Items)
	for _, it := range b.Items {
		i := slices.IndexFunc(m.Items, func(old ledger.FateItem) bool {
			return it.ID != "" && old.Kind == it.Kind && old.ID == it.ID
		})
		switch {
		case i < 0:
			m.Items = append(m.Items, it)
		case acted(it.Outcome) && !acted(m.Items[i].Outcome), !m.Items[i].Outcome.Gone() && it.Outcome.Gone():
			m.Items[i] = it
		}
	}
	m.ItemsOmitted += b.ItemsOmitted
	if x, y := m.NoticedISO, b.NoticedISO; y != "" && (x == "" || y < x) {
		m.NoticedISO = y
	}
	if x, y := m.FinishedISO, b.FinishedISO; y > x {
		m.FinishedISO = y
	}
	if engineShare(b) && !engineShare(a) {
		m.ByPID = b.ByPID
	}
	if a.By != b.By {
		m.By = ByWatchdog // both of them: "its watchdog"
	}
	if m.Owner.PID == 0 && m.Owner.Command == "" {
		m.Owner = b.Owner
	}
	switch {
	case m.Note == "":
		m.Note = b.Note
	case b.Note != "" && b.Note != m.Note:
		m.Note += "; " + b.Note
	}
	return m
}

// acted: the outcome is a reaper's doing, not a finding.
func acted(o ledger.Outcome) bool { return o == ledger.Removed || o == ledger.Ended }

// engineShare: f tells of something other than local processes (the
// share of the watchdog that reaped the engine's things).
func engineShare(f ledger.Fate) bool {
	return slices.ContainsFunc(f.Items, func(it ledger.FateItem) bool { return it.Kind != "process" })
}

// FateLine is one line on what became of a run, for a terminal: every
// field passes through a filter that keeps control characters out.
func FateLine(f ledger.FateFile) string {
	if f.Err != nil {
		return fmt.Sprintf("rightsize: run %s ended; its fate cannot be read (%s)", termtext.Clean(f.Run), termtext.Clean(f.Err.Error()))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rightsize: run %s", termtext.Clean(f.Run))
	var who []string
	if f.Owner.PID > 0 {
		who = append(who, fmt.Sprintf("pid %d", f.Owner.PID))
	}
	if f.Owner.Command != "" {
		who = append(who, termtext.Clean(termtext.Clip(f.Owner.Command, 60)))
	} else if f.Owner.Writer == "" {
		who = append(who, "another member's run")
	}
	if len(who) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(who, ", "))
	}
	when := ""
	if t, err := ledger.ParseISO(f.NoticedISO); err == nil {
		when = " " + t.Local().Format("15:04:05")
	}
	by := "its " + termtext.Clean(f.By)
	if f.By == BySweep || f.By == ByCommand {
		by = "a later " + termtext.Clean(f.By)
	}
	switch {
	case f.Note == NoteLate:
		// Not the death, told already: what the engine made after it.
		fmt.Fprintf(&b, " was reaped; then the engine made what it had been asked before the death; noticed%s by %s, which", when, by)
	case f.Owner.Ended:
		// Main's last word: nothing crashed, but something outlived the
		// run (a process that left its command's session, say).
		fmt.Fprintf(&b, " ended (exit %d) and left something behind; noticed%s by %s, which", f.Owner.ExitCode, when, by)
	default:
		fmt.Fprintf(&b, " died; noticed%s by %s, which", when, by)
	}
	counts := map[ledger.Outcome]map[string]int{}
	var kept, escaped []ledger.FateItem
	for _, it := range f.Items {
		if counts[it.Outcome] == nil {
			counts[it.Outcome] = map[string]int{}
		}
		counts[it.Outcome][it.Kind]++
		switch it.Outcome {
		case ledger.Kept:
			kept = append(kept, it)
		case ledger.Escaped:
			escaped = append(escaped, it)
		}
	}
	var parts []string
	for _, o := range ledger.FateOutcomes {
		if c := counts[o]; len(c) > 0 {
			parts = append(parts, outcomePhrase(o, countKinds(c)))
		}
	}
	var later []ledger.Outcome // outcomes of a later version: said as written
	for o := range counts {
		if !slices.Contains(ledger.FateOutcomes, o) {
			later = append(later, o)
		}
	}
	slices.Sort(later)
	for _, o := range later {
		parts = append(parts, outcomePhrase(o, countKinds(counts[o])))
	}
	if len(parts) == 0 {
		parts = append(parts, "found nothing left")
	}
	b.WriteString(" " + strings.Join(parts, "; "))
	// A sweep's time is its work; a watchdog's includes the wait before
	// its second look, so it is not shown.
	if t0, err := ledger.ParseISO(f.NoticedISO); err == nil && f.By != ByWatchdog && f.By != ByNativeWatchdog {
		if t1, err := ledger.ParseISO(f.FinishedISO); err == nil && !t1.Before(t0) {
			fmt.Fprintf(&b, ", in %s", t1.Sub(t0).Round(time.Millisecond))
		}
	}
	if by := leftBy(f.Items); by != "" {
		b.WriteString("; " + by)
	}
	if len(kept) > 0 {
		k := kept[0]
		why := ""
		if k.Note != "" {
			why = ": " + termtext.Clean(termtext.Clip(k.Note, 80))
		}
		fmt.Fprintf(&b, " (kept %s %s%s; the next sweep retries)", termtext.Clean(k.Kind), termtext.Clean(k.Name), why)
	}
	if len(escaped) > 0 {
		e := escaped[0]
		what := []string{termtext.Clean(e.Kind)}
		for _, f := range []string{e.ID, e.Name} {
			if f != "" {
				what = append(what, termtext.Clean(f))
			}
		}
		why := ""
		if e.Note != "" {
			why = ": " + termtext.Clean(termtext.Clip(e.Note, 60))
		}
		fmt.Fprintf(&b, " (escaped: %s%s; not signalled: end it yourself if it is not wanted)", strings.Join(what, " "), why)
	}
	return b.String()
}

// outcomePhrase is what the reaper did to what (what: "2 sandboxes and 1
// network"), as the words after "which" in a fate's line.
func outcomePhrase(outcome ledger.Outcome, what string) string {
	switch outcome {
	case ledger.Removed:
		return "removed " + what
	case ledger.AlreadyGone:
		return "found " + what + " already gone"
	case ledger.Ended:
		return "ended " + what
	case ledger.Kept:
		return "kept " + what
	case ledger.Escaped:
		return "found " + what + " that escaped the run"
	case ledger.NotOwned:
		return "left " + what + " alone, as not this run's"
	case ledger.LeftForMember:
		return "left " + what + " for its member's own sweep"
	case ledger.WouldRemove:
		return "would have removed " + what
	case ledger.Forgotten:
		return "forgot " + what + " that no engine it may have used has"
	}
	return "left " + what + " " + strconv.Quote(termtext.Clean(string(outcome)))
}

// countKinds says "2 sandboxes and 1 network", or "1 sandbox, 2 networks
// and 1 process".
func countKinds(c map[string]int) string {
	var parts []string
	other := 0
	for k, n := range c {
		if !slices.Contains(fateKinds, k) {
			other += n
		}
	}
	for _, k := range fateKinds {
		if n := c[k]; n > 0 {
			parts = append(parts, plural(n, k))
		}
	}
	if other > 0 {
		parts = append(parts, plural(other, "other item"))
	}
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// fateKinds are the kinds of a fate's items, in the order a line counts
// them.
var fateKinds = []string{"sandbox", "volume", "network", "image", "exec", "process"}

func plural(n int, k string) string {
	if k == "exec" {
		k = "command" // a command run in a sandbox
	}
	if n == 1 {
		return "1 " + k
	}
	switch k {
	case "sandbox":
		return fmt.Sprintf("%d sandboxes", n)
	case "process":
		return fmt.Sprintf("%d processes", n)
	}
	return fmt.Sprintf("%d %ss", n, k)
}

// maxLeftBy is how many tests a fate's line names; the rest are counted.
const maxLeftBy = 3

// leftBy says which tests made what a fate's items name, in their order:
// "left by TestCheckout/eu at store_test.go:42", "left by TestA at
// a_test.go:1, TestB at b_test.go:2 and 2 more"; "" when no item says.
func leftBy(items []ledger.FateItem) string {
	var seen []string
	for _, it := range items {
		if s := termtext.Clean(it.Origin.String()); s != "" && !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	switch n := len(seen); {
	case n == 0:
		return ""
	case n > maxLeftBy:
		return "left by " + strings.Join(seen[:maxLeftBy], ", ") + " and " + strconv.Itoa(n-maxLeftBy) + " more"
	case n == 1:
		return "left by " + seen[0]
	default:
		return "left by " + strings.Join(seen[:n-1], ", ") + " and " + seen[n-1]
	}
}
