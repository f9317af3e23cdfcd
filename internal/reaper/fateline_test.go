package reaper_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// lineShape is a fate's line as a sentence: who died, who noticed, then
// what became of its things, each phrase led by a verb.
var lineShape = regexp.MustCompile(`^rightsize: run \S+ \((pid \d+, )?[^()]+\) died; noticed( \d\d:\d\d:\d\d)? by (its|a later) [a-z ]+, which ` +
	`(removed|found|forgot|ended|kept|left) [^;]+(; (removed|found|forgot|ended|kept|left) [^;]+)*(, in \d+m?s)?(; left by .+?)?( \(.*\))*$`)

// Every outcome word, alone and with the others, at counts of one and
// many, by every kind of reaper, reads as a sentence: no "which already
// gone 2 sandboxes", no "which not this run's 1 sandbox", no "1
// sandboxes".
func TestFateLineWording(t *testing.T) {
	bys := []string{reaper.ByWatchdog, reaper.ByNativeWatchdog, reaper.BySweep, reaper.ByCommand}
	type row struct {
		name  string
		items []ledger.FateItem
		want  []string // phrases the line must hold
	}
	var rows []row
	for _, o := range ledger.FateOutcomes {
		one := []ledger.FateItem{{Kind: "sandbox", Name: "rz-1a2b3c4d-1", Outcome: o, Note: "why"}}
		many := []ledger.FateItem{
			{Kind: "sandbox", Name: "rz-1a2b3c4d-1", Outcome: o},
			{Kind: "sandbox", Name: "rz-1a2b3c4d-2", Outcome: o},
			{Kind: "network", Name: "rz-net-0c1d2e3f", Outcome: o},
		}
		rows = append(rows,
			row{string(o) + ", one", one, []string{"1 sandbox"}},
			row{string(o) + ", many", many, []string{"2 sandboxes and 1 network"}})
	}
	var all []ledger.FateItem
	for _, o := range ledger.FateOutcomes {
		all = append(all, ledger.FateItem{Kind: "process", ID: "4300", Name: "sleep", Outcome: o, Note: "why"})
	}
	rows = append(rows,
		row{"every outcome", all, nil},
		row{"three kinds", []ledger.FateItem{
			{Kind: "sandbox", Name: "a", Outcome: ledger.Removed},
			{Kind: "network", Name: "b", Outcome: ledger.Removed},
			{Kind: "exec", Name: "c", Outcome: ledger.Removed},
		}, []string{"removed 1 sandbox, 1 network and 1 command"}},
		row{"nothing", nil, []string{"which found nothing left"}},
		row{"made by a test", []ledger.FateItem{
			{Kind: "sandbox", Name: "a", Outcome: ledger.Removed, Origin: origin.Origin{Test: "TestCheckout/eu", Place: "store_test.go:42"}},
			{Kind: "network", Name: "b", Outcome: ledger.Kept, Note: "in use", Origin: origin.Setup("TestMain", "main_test.go:12")},
		}, []string{"; left by TestCheckout/eu at store_test.go:42 and Setup (TestMain) at main_test.go:12 (kept network b"}},
		row{"an outcome of a later version", []ledger.FateItem{{Kind: "sandbox", Name: "a", Outcome: "frozen"}}, []string{`which left 1 sandbox "frozen"`}})
	for _, by := range bys {
		for _, r := range rows {
			line := reaper.FateLine(ledger.FateFile{Fate: ledger.Fate{
				Run: "1a2b3c4d", By: by, NoticedISO: "2026-11-30T20:03:05.120Z", FinishedISO: "2026-11-30T20:03:05.123Z",
				Owner: ledger.FateOwner{PID: 4242, Writer: "go", Command: "store.test -test.timeout=10m0s"},
				Items: r.items,
			}})
			if !lineShape.MatchString(line) {
				t.Errorf("%s by %s: %q is not a sentence of the expected shape", r.name, by, line)
			}
			for _, w := range r.want {
				if !strings.Contains(line, w) {
					t.Errorf("%s by %s: %q does not say %q", r.name, by, line, w)
				}
			}
			for _, bad := range []string{"which already", "which not ", "which escaped", "1 sandboxes", "1 networks", "1 processes", "  ", "; ;", "which removed ;", "which  "} {
				if strings.Contains(line, bad) {
					t.Errorf("%s by %s: %q holds %q", r.name, by, line, bad)
				}
			}
		}
	}
}

// A kept item's note is clipped, but never inside the command it gives.
func TestFateLineKeepsCommandWhole(t *testing.T) {
	cmd := "rightsize sweep --run 3fe2224a9b8c7d6e"
	line := reaper.FateLine(ledger.FateFile{Fate: ledger.Fate{Run: "3fe2224a9b8c7d6e", By: reaper.BySweep,
		Items: []ledger.FateItem{{Kind: "process", Name: "sleep 600", Outcome: ledger.Kept,
			Note: "in a process group that cannot be proven the run's, so it is not signalled (" + cmd + " ends it)"}}}})
	if !strings.Contains(line, cmd) {
		t.Errorf("%q cuts the command %q", line, cmd)
	}
}

// One death, two watchdogs (the script's of the sandboxes, the native
// one's of the local processes): one line tells both, noticed when the
// first noticed; another run's fate, and a later sweep's of the same run,
// stay lines of their own.
func TestFateLinesOneDeathOneLine(t *testing.T) {
	owner := ledger.FateOwner{PID: 4242, Writer: "go", Command: "store.test"}
	fate := func(run, by, noticed string, items ...ledger.FateItem) ledger.FateFile {
		return ledger.FateFile{Fate: ledger.Fate{Run: run, By: by, NoticedISO: noticed, FinishedISO: noticed, Owner: owner, Items: items}}
	}
	sbx := ledger.FateItem{Kind: "sandbox", Name: "rz-1a2b3c4d-1", Outcome: ledger.Removed}
	proc := ledger.FateItem{Kind: "process", ID: "4300", Name: "sleep", Outcome: ledger.Ended}
	lines := reaper.FateLines([]ledger.FateFile{
		fate("1a2b3c4d", reaper.ByNativeWatchdog, "2026-11-30T20:03:05.100Z", proc),
		fate("0f0f0f0f", reaper.ByWatchdog, "2026-11-30T20:03:04.000Z", sbx),
		fate("1a2b3c4d", reaper.ByWatchdog, "2026-11-30T20:03:05.090Z", sbx, sbx),
		fate("1a2b3c4d", reaper.BySweep, "2026-11-30T20:04:00.000Z", sbx),
	})
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (the death of 1a2b3c4d, 0f0f0f0f's, the later sweep's):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, want := range []string{"run 1a2b3c4d", "by its watchdog, which", "removed 2 sandboxes", "ended 1 process"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the merged line %q does not say %q", lines[0], want)
		}
	}
	if !lineShape.MatchString(lines[0]) {
		t.Errorf("the merged line %q is not a sentence of the expected shape", lines[0])
	}
	if !strings.Contains(lines[1], "run 0f0f0f0f") || !strings.Contains(lines[2], "by a later sweep") {
		t.Errorf("the other lines:\n%s\n%s", lines[1], lines[2])
	}
}

// A fate's line names the tests that left what it tells of, each once, at
// most three, with the rest counted; a name that would forge a line is
// escaped.
func TestFateLineLeftBy(t *testing.T) {
	at := func(test, place string) origin.Origin { return origin.Origin{Test: test, Place: place} }
	for _, tc := range []struct {
		origins []origin.Origin
		want    string
	}{
		{nil, ""},
		{[]origin.Origin{{}, {}}, ""},
		{[]origin.Origin{at("TestA", "a_test.go:1"), at("TestA", "a_test.go:1"), {}}, "; left by TestA at a_test.go:1"},
		{[]origin.Origin{at("TestA", ""), at("TestB", "b_test.go:2")}, "; left by TestA and TestB at b_test.go:2"},
		{[]origin.Origin{at("TestA", "a_test.go:1"), at("TestB", "b_test.go:2"), at("TestC", "c_test.go:3"), at("TestD", "d_test.go:4"), at("TestE", "e_test.go:5")},
			"; left by TestA at a_test.go:1, TestB at b_test.go:2, TestC at c_test.go:3 and 2 more"},
		{[]origin.Origin{at("TestA/\x1b[2J\n", "a_test.go:1")}, `; left by TestA/\x1b[2J\n at a_test.go:1`},
	} {
		var items []ledger.FateItem
		for i, o := range tc.origins {
			items = append(items, ledger.FateItem{Kind: "sandbox", Name: "rz-1a2b3c4d-" + string(rune('1'+i)), Outcome: ledger.Removed, Origin: o})
		}
		line := reaper.FateLine(ledger.FateFile{Fate: ledger.Fate{Run: "1a2b3c4d", By: reaper.ByWatchdog, Owner: ledger.FateOwner{PID: 4242, Writer: "go", Command: "store.test"}, Items: items}})
		switch {
		case tc.want == "" && strings.Contains(line, "left by"):
			t.Errorf("%q names a test, where no item says one", line)
		case tc.want != "" && !strings.HasSuffix(line, tc.want):
			t.Errorf("%q does not end in %q", line, tc.want)
		}
		if !lineShape.MatchString(line) {
			t.Errorf("%q is not a sentence of the expected shape", line)
		}
	}
}
