package reaper_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

// A sweep writes the fate of each dead run it reaps: what was removed,
// what was kept and why; the first process to tell it tells it, once.
func TestSweepWritesFates(t *testing.T) {
	cache := t.TempDir()
	runs := runsDir(t, cache)
	rec := deadRecordFor(t)
	writeRun(t, runs, "dead0001", rec, []string{"rz-dead0001-1", "rz-dead0001-2"}, []string{"rz-net-d1"})
	writeRun(t, runs, "dead0002", rec, nil, nil) // nothing listed: no fate
	fake := newFake(map[string]error{
		"rz-dead0001-1": nil,
		"rz-dead0001-2": backend.ErrUnreachable, // the engine did not answer
		"rz-net-d1":     nil,
	})
	_, err := reaper.Sweep(context.Background(), fake, reaper.WithCacheDir(cache))
	require.NoError(t, err)

	fates, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Len(t, fates, 1, "one fate: the run that listed nothing has none")
	f := fates[0]
	require.NoError(t, f.Err)
	require.Equal(t, "dead0001", f.Run)
	require.Equal(t, reaper.BySweep, f.By)
	_, err = ledger.ParseISO(f.NoticedISO)
	require.NoError(t, err)
	got := map[string]ledger.FateItem{}
	for _, it := range f.Items {
		got[it.Kind+" "+it.Name] = it
	}
	require.Equal(t, ledger.Removed, got["sandbox rz-dead0001-1"].Outcome)
	require.Equal(t, ledger.Removed, got["network rz-net-d1"].Outcome)
	kept := got["sandbox rz-dead0001-2"]
	require.Equal(t, ledger.Kept, kept.Outcome)
	require.Contains(t, kept.Note, "unreachable", "a kept item says why")

	lines := reaper.TellFates(cache, "")
	require.Len(t, lines, 1)
	require.Contains(t, lines[0], "run dead0001")
	require.Contains(t, lines[0], "removed 1 sandbox and 1 network")
	require.Contains(t, lines[0], "kept 1 sandbox")
	require.Contains(t, lines[0], "the next sweep retries")
	require.Empty(t, reaper.TellFates(cache, ""), "a fate is told once")
}

// A run kept again with nothing removed gets no second fate: a run the
// engine keeps refusing must not fill the fates or be told at every start.
// When something of it is removed at last, that is told.
func TestSweepKeptAgainNoNewFate(t *testing.T) {
	cache := t.TempDir()
	runs := runsDir(t, cache)
	writeRun(t, runs, "dead0003", deadRecordFor(t), []string{"rz-dead0003-1"}, nil)
	fake := newFake(map[string]error{"rz-dead0003-1": backend.ErrUnreachable})
	for range 3 {
		_, err := reaper.Sweep(context.Background(), fake, reaper.WithCacheDir(cache))
		require.NoError(t, err)
	}
	fates, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Len(t, fates, 1, "three sweeps that only kept the run: one fate")
	require.Len(t, reaper.TellFates(cache, ""), 1)

	fake.objs["rz-dead0003-1"] = nil // the engine answers again
	_, err = reaper.Sweep(context.Background(), fake, reaper.WithCacheDir(cache))
	require.NoError(t, err)
	fates, err = ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Len(t, fates, 2, "the removal at last is a fate of its own")
	require.Equal(t, ledger.Removed, fates[0].Items[0].Outcome)
}

// The command line's sweep says it was the command; a dry run writes none.
func TestSweepFateBy(t *testing.T) {
	cache := t.TempDir()
	runs := runsDir(t, cache)
	writeRun(t, runs, "dead0003", deadRecordFor(t), []string{"rz-dead0003-1"}, nil)
	_, err := reaper.Sweep(context.Background(), newFake(nil), reaper.WithCacheDir(cache), reaper.DryRun())
	require.NoError(t, err)
	fates, _ := ledger.ReadFates(cache)
	require.Empty(t, fates, "a dry run writes no fate")
	_, err = reaper.Sweep(context.Background(), newFake(nil), reaper.WithCacheDir(cache), reaper.WithFateBy(reaper.ByCommand))
	require.NoError(t, err)
	fates, _ = ledger.ReadFates(cache)
	require.Len(t, fates, 1)
	require.Equal(t, reaper.ByCommand, fates[0].By)
	require.Equal(t, ledger.AlreadyGone, fates[0].Items[0].Outcome)
}

// Whatever a fate file holds, its line is one line of printable text, and
// the telling of many is bounded.
func TestFateLineHostile(t *testing.T) {
	cache := t.TempDir()
	now := time.Now()
	run := "evil\u202e0001\n"
	if runtime.GOOS == "windows" {
		run = "evil\u202e0001" // a file name there holds no control character
	}
	_, err := ledger.WriteFate(cache, ledger.Fate{
		Run: run, By: "watchdog\x1b[2J\n$(rm -rf /)\u2066",
		Owner: ledger.FateOwner{PID: 1, Command: "go test\n\x1b]0;pwned\x07 `id`\u202e\u200f", Writer: "go"},
		Items: []ledger.FateItem{{Kind: "sandbox\n", Name: "x\x1b[31m\u202etxt.exe", Outcome: ledger.Kept, Note: "why\r\nnot\u061c\u0085"}},
	}, now)
	require.NoError(t, err)
	for i := range 6 {
		_, err := ledger.WriteFate(cache, ledger.Fate{Run: "many000" + string(rune('0'+i)), By: "sweep", Items: []ledger.FateItem{{Kind: "sandbox", Name: "a", Outcome: ledger.Removed}}}, now.Add(-time.Duration(i+1)*time.Second))
		require.NoError(t, err)
	}
	lines := reaper.TellFates(cache, "")
	require.Len(t, lines, 4, "three fates, then how many more")
	require.Contains(t, lines[3], "and 4 more ended runs: rightsize ls --fates")
	for _, l := range lines {
		require.Equal(t, l, termtext.Clean(l), "a control or bidirectional character reaches the terminal raw")
	}
	require.True(t, strings.Contains(lines[0], `\x1b`), "escapes are shown, not sent: %q", lines[0])
	require.True(t, strings.Contains(lines[0], `x\x1b[31m\u202etxt.exe`), "a right-to-left override is shown, not obeyed: %q", lines[0])
}

// A kept item without a note (what a watchdog that could not say why
// writes) reads as kept, with no empty reason.
func TestFateLineKeptWithoutNote(t *testing.T) {
	line := reaper.FateLine(ledger.FateFile{Fate: ledger.Fate{Run: "1a2b3c4d", By: reaper.ByWatchdog,
		Items: []ledger.FateItem{{Kind: "sandbox", ID: "abc", Name: "rz-1a2b3c4d-1", Outcome: ledger.Kept}}}})
	require.Contains(t, line, "(kept sandbox rz-1a2b3c4d-1; the next sweep retries)")
	require.NotContains(t, line, ": ;")
}

// TestReportHostileRunID: a run id is any file stem another member chose:
// a newline or a right-to-left override in one forges no line of the
// sweep's report.
func TestReportHostileRunID(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a Windows file name holds no newline nor colon, so no run id there can forge a line")
	}
	cache := t.TempDir()
	runs := runsDir(t, cache)
	me := self(t)
	id := "evil\n  0000dead  reaped  dead: forged\u202e"
	writeRun(t, runs, id, recordOf(me, backend.Docker, "unix:///fake.sock").Marshal(), nil, nil)
	rep, err := reaper.Sweep(context.Background(), newFake(nil), reaper.WithCacheDir(cache))
	require.NoError(t, err)
	var b strings.Builder
	_, err = rep.WriteTo(&b)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 2, "a summary and one run: %q", b.String())
	require.True(t, strings.HasPrefix(lines[1], `  evil\n  0000dead  reaped  dead: forged\u202e  left alone  alive`), "the id, escaped: %q", lines[1])
	for _, l := range lines {
		require.Equal(t, l, termtext.Clean(l))
	}
}

// A run whose owner ended through Main, and left a process its watchdog
// found, is told as ended with its exit code, never as dead.
func TestFateLineEndedRun(t *testing.T) {
	f := ledger.FateFile{Fate: ledger.Fate{Run: "1a2b3c4d", By: reaper.ByNativeWatchdog,
		Owner: ledger.FateOwner{PID: 42, Writer: "go", Command: "store.test", Ended: true, ExitCode: 1},
		Items: []ledger.FateItem{{Kind: "process", ID: "4300", Name: "sleep", Outcome: ledger.Escaped}}}}
	line := reaper.FateLine(f)
	require.Contains(t, line, "rightsize: run 1a2b3c4d (pid 42, store.test) ended (exit 1) and left something behind; noticed")
	require.NotContains(t, line, "died")
	f.Owner.Ended = false
	require.Contains(t, reaper.FateLine(f), ") died; noticed")
}
