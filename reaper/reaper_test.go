package reaper_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	iledger "github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

// A sweep from code, on the engine this process resolves: a dry run
// touches nothing; a dead run is reaped (its name, never created, is
// already gone; its files deleted); a live one is left alone, even named,
// with its owner's liveness.
func TestSweep(t *testing.T) {
	// The backend is pinned: -short never reaches an engine (the memory
	// backend, in a folder of the test's), and the records name the one
	// the sweep uses.
	be, endpoint := "docker", ""
	if testing.Short() {
		// A memory "engine" is its folder: the records name it, as a Go
		// run on it writes them.
		dir := t.TempDir()
		be, endpoint = "memory", `,"endpoint":"memory:`+dir+`"`
		t.Setenv("RIGHTSIZE_MEMORY_DIR", dir)
	}
	t.Setenv("RIGHTSIZE_BACKEND", be)
	cache := t.TempDir()
	runs := filepath.Join(cache, "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	write := func(id string, pid int, started time.Time) {
		rec := `{"pid":` + strconv.Itoa(pid) + `,"startedIso":"` + started.UTC().Format("2006-01-02T15:04:05.000Z") + `","backend":"` + be + `"` + endpoint + `}` + "\n"
		if err := os.WriteFile(filepath.Join(runs, id+".json"), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(runs, id+".sandboxes"), []byte("rz-"+id+"-1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dead, live := "d0"+strconv.Itoa(os.Getpid()%1000000), "a0"+strconv.Itoa(os.Getpid()%1000000)
	// The live run's start is this process's own: a clock read now would
	// be seconds after it once the test runs again in the same process
	// (-count), and the pid would look reused.
	me, err := iledger.Self()
	if err != nil || me.Start.IsZero() {
		t.Fatalf("this process's start: %+v, %v", me, err)
	}
	write(dead, child.Process.Pid, time.Now())
	write(live, os.Getpid(), me.Start)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := reaper.Sweep(ctx, reaper.WithCacheDir(cache), reaper.DryRun())
	if err != nil {
		t.Fatal(err)
	}
	if rr, ok := rep.Run(dead); !ok || rr.Decision != reaper.WouldReap {
		t.Fatalf("dry run: %+v, want %s would be reaped", rep, dead)
	}
	if _, err := os.Stat(filepath.Join(runs, dead+".json")); err != nil {
		t.Fatalf("a dry run touched the dead run's record: %v", err)
	}

	// Named, as a person names a run they know dead.
	rep, err = reaper.Sweep(ctx, reaper.WithCacheDir(cache), reaper.OnlyRun(dead))
	if err != nil {
		t.Fatal(err)
	}
	rr, ok := rep.Run(dead)
	if !ok || rr.Decision != reaper.Reaped || rr.Liveness.State != ledger.Dead || len(rr.Removed) != 1 || rr.Removed[0].Outcome != ledger.AlreadyGone {
		t.Errorf("the dead run: %+v, want reaped, its one name already gone", rr)
	}
	if _, err := os.Stat(filepath.Join(runs, dead+".json")); !os.IsNotExist(err) {
		t.Errorf("the dead run's record is still there: %v\n%+v", err, rr)
	}
	if rep, err = reaper.Sweep(ctx, reaper.WithCacheDir(cache), reaper.OnlyRun(live)); err != nil {
		t.Fatal(err)
	}
	rr, ok = rep.Run(live)
	if !ok || rr.Decision != reaper.LeftAlone || rr.Liveness.State != ledger.Alive {
		t.Errorf("the live run: %+v, want left alone, judged alive", rr)
	}
	for _, ext := range []string{".json", ".sandboxes"} {
		if err := os.Remove(filepath.Join(runs, live+ext)); err != nil {
			t.Errorf("the live run's %s: %v", ext, err)
		}
	}
}
