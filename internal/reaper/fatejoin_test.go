package reaper_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// One death, two watchdogs: the native one of the run's local processes
// writes its share first, and while the script one of its sandboxes still
// works, no process tells the death; the second share joins the first,
// and the death is then told once, whole, as the engine's reaper's.
func TestTwoWatchdogsOneFateToldOnce(t *testing.T) {
	cache := t.TempDir()
	const run = "5e5e5e5e"
	// The script watchdog, still reaping: a live process marked as the
	// run's watchdog. (The native one, which writes first, is this
	// process, unmarked: it ends once it has written.)
	other := sleeperCommand()
	require.NoError(t, other.Start())
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	require.NoError(t, ledger.WriteWatchdogMark(cache, run, other.Process.Pid))

	owner := ledger.FateOwner{PID: 4242, Writer: "go", Command: "store.test"}
	at := func(ms int) string { return ledger.FormatISO(time.UnixMilli(1_800_000_000_000 + int64(ms))) }
	procs := ledger.Fate{
		Run: run, By: reaper.ByNativeWatchdog, ByPID: os.Getpid(), NoticedISO: at(10), FinishedISO: at(20), Owner: owner,
		Items: []ledger.FateItem{
			{Kind: "process", ID: "4300", Name: "sleep 1000", Outcome: ledger.Ended},
			{Kind: "process", ID: "4301", Name: "sleep 1000", Outcome: ledger.Kept},
		},
	}
	first, err := reaper.WriteShareFate(cache, procs, time.Now())
	require.NoError(t, err)
	require.Empty(t, reaper.TellFates(cache, ""), "a share is told while the run's other watchdog still works")

	engine := ledger.Fate{
		Run: run, By: reaper.ByWatchdog, ByPID: other.Process.Pid, NoticedISO: at(5), FinishedISO: at(90), Owner: owner,
		Items: []ledger.FateItem{
			{Kind: "sandbox", ID: "abc123", Name: "rz-" + run + "-1", Outcome: ledger.Removed},
			// The same process, found ended by the other: told once, as
			// the one that ended it.
			{Kind: "process", ID: "4301", Name: "sleep 1000", Outcome: ledger.Ended},
		},
	}
	second, err := reaper.WriteShareFate(cache, engine, time.Now().Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, first, second, "the second share is joined to the first's fate")
	require.NoError(t, other.Process.Kill())
	other.Wait()

	fates, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Len(t, fates, 1, "one death, one fate")
	f := fates[0]
	require.NoError(t, f.Err)
	require.Equal(t, other.Process.Pid, f.ByPID, "the fate is the engine's reaper's: it removed the sandbox")
	require.Equal(t, reaper.ByWatchdog, f.By)
	require.Equal(t, at(5), f.NoticedISO, "noticed when the first noticed")
	require.Equal(t, at(90), f.FinishedISO, "finished when the last finished")
	require.Equal(t, []ledger.FateItem{
		{Kind: "process", ID: "4300", Name: "sleep 1000", Outcome: ledger.Ended},
		{Kind: "process", ID: "4301", Name: "sleep 1000", Outcome: ledger.Ended},
		{Kind: "sandbox", ID: "abc123", Name: "rz-" + run + "-1", Outcome: ledger.Removed},
	}, f.Items)

	lines := reaper.TellFates(cache, "")
	require.Len(t, lines, 1, "%q", lines)
	for _, want := range []string{"run " + run, "removed 1 sandbox", "ended 2 processes"} {
		require.Contains(t, lines[0], want)
	}
	require.Empty(t, reaper.TellFates(cache, ""), "told once")
}

// A sweep's fate is another event (what a watchdog kept, reaped later):
// a watchdog's share never joins it; and a run with one watchdog tells its
// fate as soon as it is written, that watchdog still alive.
func TestShareFateJoinsWatchdogsAlone(t *testing.T) {
	cache := t.TempDir()
	const run = "6f6f6f6f"
	require.NoError(t, ledger.WriteWatchdogMark(cache, run, os.Getpid()))
	swept := ledger.Fate{Run: run, By: reaper.BySweep, ByPID: 1, Items: []ledger.FateItem{{Kind: "sandbox", Name: "rz-" + run + "-1", Outcome: ledger.Removed}}}
	_, err := ledger.WriteFate(cache, swept, time.Now())
	require.NoError(t, err)
	share := ledger.Fate{Run: run, By: reaper.ByNativeWatchdog, ByPID: os.Getpid(), Items: []ledger.FateItem{{Kind: "process", ID: "4300", Name: "sleep", Outcome: ledger.Ended}}}
	_, err = reaper.WriteShareFate(cache, share, time.Now().Add(time.Second))
	require.NoError(t, err)
	fates, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Len(t, fates, 2)
	var bys []string
	for _, f := range fates {
		bys = append(bys, f.By+"/"+strconv.Itoa(len(f.Items)))
	}
	require.ElementsMatch(t, []string{reaper.BySweep + "/1", reaper.ByNativeWatchdog + "/1"}, bys)
	lines := reaper.TellFates(cache, "")
	require.Len(t, lines, 2, "%q", lines)
	require.True(t, strings.Contains(strings.Join(lines, "\n"), "ended 1 process"), "%q", lines)
}
