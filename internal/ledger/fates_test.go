package ledger_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

func TestFateRoundTrip(t *testing.T) {
	cache := t.TempDir()
	now := time.Now()
	hostile := "go test ./x\n\x1b[2Jrm -rf / \"quoted\" " + strings.Repeat("é", 400)
	f := ledger.Fate{
		Run: "1a2b3c4d", By: "watchdog", ByPID: 42,
		Owner: ledger.FateOwner{PID: 7, Writer: "go", Command: hostile},
		Items: []ledger.FateItem{{Kind: "sandbox", ID: "abc", Name: "rz-1a2b3c4d-1", Outcome: ledger.Removed}},
	}
	p, err := ledger.WriteFate(cache, f, now)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(cache, "fates", fmt.Sprintf("1a2b3c4d-%d.json", now.UnixMilli())), p)
	info, err := os.Stat(p)
	require.NoError(t, err)
	if runtime.GOOS != "windows" { // which keeps no permission bits but read-only
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	}

	got, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoError(t, got[0].Err)
	require.Equal(t, 1, got[0].Version)
	require.Equal(t, "1a2b3c4d", got[0].Run)
	require.Equal(t, f.Items, got[0].Items)
	require.False(t, got[0].Told)
	// The command is kept as data (escaped in the file), cut to its bound
	// on a rune boundary.
	require.True(t, strings.HasPrefix(got[0].Owner.Command, "go test ./x\n\x1b[2J"))
	require.LessOrEqual(t, len(got[0].Owner.Command), 512+len("…"))
	require.True(t, strings.HasSuffix(got[0].Owner.Command, "…"))

	require.True(t, ledger.ClaimTell(p), "the first claim tells")
	require.False(t, ledger.ClaimTell(p), "a fate is told once")
	got, _ = ledger.ReadFates(cache)
	require.True(t, got[0].Told)
}

// A fate is written of a run its cache dir recorded: where that folder is
// gone (a test's temporary folder, removed as the test ended while its
// watchdog still worked), it is not made again.
func TestFateNeverMakesTheCacheDir(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "removed", "cache")
	_, err := ledger.WriteFate(gone, ledger.Fate{Run: "1a2b3c4d", By: "watchdog"}, time.Now())
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = os.Lstat(filepath.Dir(gone))
	require.ErrorIs(t, err, fs.ErrNotExist, "the fate made the cache dir's parent again")
}

func TestFateBounds(t *testing.T) {
	cache := t.TempDir()
	items := make([]ledger.FateItem, ledger.MaxFateItems+50)
	for i := range items {
		items[i] = ledger.FateItem{Kind: "sandbox", Name: fmt.Sprintf("rz-x-%d", i), Outcome: ledger.Removed}
	}
	_, err := ledger.WriteFate(cache, ledger.Fate{Run: "r1", By: "sweep", Items: items}, time.Now())
	require.NoError(t, err)
	got, _ := ledger.ReadFates(cache)
	require.Len(t, got[0].Items, ledger.MaxFateItems)
	require.Equal(t, 50, got[0].ItemsOmitted)

	_, err = ledger.WriteFate(cache, ledger.Fate{Run: "../x"}, time.Now())
	require.Error(t, err, "a run id that is not a file stem")
}

func TestFateUnreadable(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "fates")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	now := time.Now().UnixMilli()
	require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("bad-%d.json", now)), []byte("{not json"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("big-%d.json", now-1)), make([]byte, ledger.MaxFateSize+1), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "noise.json"), []byte("{}"), 0o600))
	got, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Len(t, got, 2, "files not named <run>-<ms>.json are not fates")
	for _, f := range got {
		require.Error(t, f.Err, f.Path)
	}
}

func TestPruneFates(t *testing.T) {
	cache := t.TempDir()
	now := time.Now()
	// MaxFates+10 recent fates, and 3 older than MaxFateAge.
	for i := range ledger.MaxFates + 10 {
		p, err := ledger.WriteFate(cache, ledger.Fate{Run: fmt.Sprintf("r%d", i), By: "sweep"}, now.Add(-time.Duration(i)*time.Minute))
		require.NoError(t, err)
		if i%2 == 0 {
			ledger.ClaimTell(p)
		}
	}
	for i := range 3 {
		_, err := ledger.WriteFate(cache, ledger.Fate{Run: fmt.Sprintf("old%d", i), By: "sweep"}, now.Add(-ledger.MaxFateAge-time.Hour))
		require.NoError(t, err)
	}
	// An owner stub of a run without a record, old: goes; a fresh one stays.
	require.NoError(t, ledger.WriteOwnerStub(cache, "gone0001", ledger.FateOwner{PID: 1}))
	old := now.Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(ledger.OwnerStubPath(cache, "gone0001"), old, old))
	require.NoError(t, ledger.WriteOwnerStub(cache, "live0001", ledger.FateOwner{PID: 2, Command: "go test"}))

	ledger.PruneFates(cache, now)
	got, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Len(t, got, ledger.MaxFates)
	require.Equal(t, "r0", got[0].Run, "the newest first")
	ents, _ := os.ReadDir(filepath.Join(cache, "fates"))
	var fates, marks int
	for _, e := range ents {
		switch {
		case strings.HasSuffix(e.Name(), ".json"):
			fates++
		case strings.HasSuffix(e.Name(), ".told"):
			marks++
		}
	}
	require.Equal(t, ledger.MaxFates, fates)
	require.Equal(t, ledger.MaxFates/2, marks, "the marks of pruned fates go with them")
	_, err = os.Stat(ledger.OwnerStubPath(cache, "gone0001"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, "go test", ledger.ReadOwnerStub(cache, "live0001").Command)
}

// TestFatesOfOneMillisecond: two fates of one run written in the same
// millisecond (a watchdog's and a sweep's, two sweeps') are two fates: the
// second never replaces the first.
func TestFatesOfOneMillisecond(t *testing.T) {
	cache := t.TempDir()
	now := time.Now()
	var paths []string
	for _, by := range []string{"watchdog", "sweep", "rightsize sweep"} {
		p, err := ledger.WriteFate(cache, ledger.Fate{Run: "same0001", By: by,
			Items: []ledger.FateItem{{Kind: "sandbox", Name: "rz-same0001-1", Outcome: ledger.Kept, Note: by}}}, now)
		require.NoError(t, err)
		paths = append(paths, p)
	}
	fates, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	var by []string
	for _, f := range fates {
		require.NoError(t, f.Err)
		by = append(by, f.By)
	}
	require.ElementsMatch(t, []string{"watchdog", "sweep", "rightsize sweep"}, by, "every fate written is read back: %q", paths)
	require.Len(t, fates, 3)
}

// A long note is told once per host (per cache dir) a day, whatever the
// number of processes that would tell it.
func TestTellNote(t *testing.T) {
	cache := t.TempDir()
	now := time.Now()
	require.True(t, ledger.TellNote(cache, "Ryuk is off", now), "the first process tells it")
	require.False(t, ledger.TellNote(cache, "Ryuk is off", now), "the next one does not")
	require.True(t, ledger.TellNote(cache, "another note", now), "a different note is told")
	require.True(t, ledger.TellNote(cache, "Ryuk is off", now.Add(ledger.NoteAgainAfter+time.Minute)), "told again a day later")
	require.False(t, ledger.TellNote(cache, "Ryuk is off", now.Add(ledger.NoteAgainAfter+2*time.Minute)))
	fates, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Empty(t, fates, "a note's mark is no fate")
	ledger.PruneFates(cache, now.Add(2*time.Minute))
	require.False(t, ledger.TellNote(cache, "another note", now.Add(3*time.Minute)), "pruning the fates keeps the marks")
}

// A watchdog mark counts while its process lives, and not for another
// process that took its pid.
func TestLiveWatchdog(t *testing.T) {
	cache := t.TempDir()
	require.Zero(t, ledger.LiveWatchdog(cache, "run00001"), "no mark")
	require.NoError(t, ledger.WriteWatchdogMark(cache, "run00001", os.Getpid()))
	require.Equal(t, os.Getpid(), ledger.LiveWatchdog(cache, "run00001"))
	require.Zero(t, ledger.LiveWatchdog(cache, "run00002"), "another run's mark")

	// This pid, recorded with another start: a process that took it.
	p := filepath.Join(ledger.FatesPath(cache), ".run00003.watchdog-"+strconv.Itoa(os.Getpid()))
	require.NoError(t, os.WriteFile(p, []byte(`{"pid":`+strconv.Itoa(os.Getpid())+`,"startTicks":1,"startIso":"2001-01-01T00:00:00.000Z"}`), 0o600))
	require.Zero(t, ledger.LiveWatchdog(cache, "run00003"), "a pid taken by another process")

	ledger.RemoveWatchdogMarks(cache, "run00001")
	require.Zero(t, ledger.LiveWatchdog(cache, "run00001"), "removed")
	ledger.PruneFates(cache, time.Now().Add(2*time.Hour))
	_, err := os.Lstat(p)
	require.True(t, os.IsNotExist(err), "an old mark of a run with no files is pruned (%v)", err)
}

// Joiners of one run's fate, at once, leave one fate holding every
// share: the read, the merge and the write are one step under the fates
// folder's lock. A fate the join refuses is left as it is, and the share
// is a fate of its own.
func TestJoinFateOneStep(t *testing.T) {
	cache := t.TempDir()
	const run, n = "7a7a7a7a", 16
	join := func(share ledger.Fate) func(ledger.Fate) (ledger.Fate, bool) {
		return func(old ledger.Fate) (ledger.Fate, bool) {
			if old.By != "watchdog" {
				return old, false
			}
			old.Items = append(old.Items, share.Items...)
			return old, true
		}
	}
	_, err := ledger.WriteFate(cache, ledger.Fate{Run: run, By: "sweep", Items: []ledger.FateItem{{Kind: "sandbox", Name: "rz-7a7a7a7a-0", Outcome: ledger.Removed}}}, time.Now())
	require.NoError(t, err)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			share := ledger.Fate{Run: run, By: "watchdog", ByPID: i + 1, Items: []ledger.FateItem{{Kind: "process", ID: strconv.Itoa(i + 1), Outcome: ledger.Ended}}}
			_, err := ledger.JoinFate(cache, share, time.Now().Add(time.Second), join(share))
			errs <- err
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	fates, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Len(t, fates, 2, "the sweep's fate, and one of the watchdogs' shares")
	seen := map[string]bool{}
	for _, f := range fates {
		require.NoError(t, f.Err)
		if f.By == "sweep" {
			require.Len(t, f.Items, 1)
			continue
		}
		for _, it := range f.Items {
			seen[it.ID] = true
		}
	}
	require.Len(t, seen, n, "every share is in the one fate")
	// A run id that names no run is refused, as WriteFate refuses it.
	_, err = ledger.JoinFate(cache, ledger.Fate{Run: "../x"}, time.Now(), join(ledger.Fate{}))
	require.Error(t, err)
}

// TestReadUntoldFates: the fates no process has told, newest first; a
// told fate is not opened (a told fate that cannot be read is not among
// them, where ReadFates returns it with its error).
func TestReadUntoldFates(t *testing.T) {
	cache := t.TempDir()
	now := time.Now()
	var paths []string
	for i := range 4 {
		p, err := ledger.WriteFate(cache, ledger.Fate{Run: fmt.Sprintf("r%d", i), By: "sweep"}, now.Add(-time.Duration(i)*time.Minute))
		require.NoError(t, err)
		paths = append(paths, p)
	}
	require.True(t, ledger.ClaimTell(paths[1]))
	require.True(t, ledger.ClaimTell(paths[3]))
	require.NoError(t, os.WriteFile(paths[3], []byte("{not json"), 0o600))

	got, err := ledger.ReadUntoldFates(cache)
	require.NoError(t, err)
	var runs []string
	for _, f := range got {
		require.NoError(t, f.Err, f.Path)
		require.False(t, f.Told)
		runs = append(runs, f.Run)
	}
	require.Equal(t, []string{"r0", "r2"}, runs)

	all, err := ledger.ReadFates(cache)
	require.NoError(t, err)
	require.Len(t, all, 4)
	require.True(t, all[1].Told)
	require.Error(t, all[3].Err, "ReadFates opens the told ones")
}
