package sandboxtest

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/rightsize/rightsize-go/internal/reaper"
)

// ttyPath is the terminal fates are told on when the process has one,
// stderrShown whether `go test` shows stderr of a passing package (-v),
// and toJSON whether the output goes to test2json (go test -json), whose
// reader decides what to show; all replaced by tests.
var (
	ttyPath     = "/dev/tty"
	stderrShown = func() bool { return verbose() && !toJSON() }
	toJSON      = func() bool { return testFlag("test.v") == "test2json" }
)

// envStepSummary is GitHub Actions' file of the job's summary, which
// `go test` does not hide.
const envStepSummary = "GITHUB_STEP_SUMMARY"

// shown are fates told on stderr only, which `go test` hides when the
// package passes: Main marks them told when the package failed.
var (
	shownMu sync.Mutex
	shown   []reaper.Fate
)

// tellFates tells the fates of runs that ended since one was last seen.
// A fate is marked told only where it is surely seen: on the terminal
// (/dev/tty), in the CI job's summary, on stderr under -test.v, or on
// stderr of a package that failed (markShown). Otherwise it is printed on
// stderr and left untold, so the next process tells it again. Under
// `go test -json` stderr never counts: gotestsum, tparse and IDEs hide
// the output of passing tests and packages, and show a failed package's
// only for its failed tests.
func tellFates(cache, own string) {
	fates := reaper.UntoldFates(cache, own)
	if len(fates) == 0 {
		return
	}
	tty := openTTY()
	var summary *os.File
	if p := os.Getenv(envStepSummary); p != "" {
		f, err := reaper.OpenSummary(p)
		if err != nil {
			warnf("rightsize: the fates could not be added to the job's summary (%s): %v", envStepSummary, err)
		} else {
			summary = f
		}
	}
	if tty == nil && summary == nil && !stderrShown() {
		for _, l := range reaper.FateLines(fates) {
			warnf("%s", l)
		}
		shownMu.Lock()
		shown = append(shown, fates...)
		shownMu.Unlock()
		return
	}
	// Claimed before they are told: two processes on one terminal tell
	// each fate once between them.
	lines := reaper.FateLines(reaper.MarkTold(fates))
	if summary != nil {
		if err := appendSummary(summary, lines); err != nil {
			warnf("rightsize: the fates could not be added to the job's summary (%s): %v", envStepSummary, err)
		}
	}
	if tty != nil {
		defer tty.Close()
		if !stderrShown() {
			// Not on stderr too: a failing package would show them twice.
			fmt.Fprint(tty, strings.Join(lines, "\n")+"\n")
			return
		}
	}
	for _, l := range lines {
		warnf("%s", l)
	}
}

// openTTY is the process's terminal, nil when it has none (CI, a service).
func openTTY() *os.File {
	if ttyPath == "" {
		return nil
	}
	f, err := os.OpenFile(ttyPath, os.O_WRONLY, 0)
	if err != nil {
		return nil
	}
	return f
}

// appendSummary adds lines to the job's summary file, as a code block of
// their own (indented, so no text of a line can end it or become markup).
func appendSummary(f *os.File, lines []string) error {
	var b strings.Builder
	b.WriteString("\n**rightsize: runs that ended badly** (`rightsize ls --fates` for the rest)\n\n")
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	b.WriteString("\n")
	_, err := f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// markShown marks told the fates this process printed on stderr alone,
// once it knows they were seen (the package failed, so `go test` showed
// its output).
func markShown(seen bool) {
	shownMu.Lock()
	defer shownMu.Unlock()
	if seen && !toJSON() {
		reaper.MarkTold(shown)
	}
	shown = nil
}
