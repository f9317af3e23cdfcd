package reaper_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Sibling processes start at once and each sweeps at its first backend
// use: they must share the work, not all remove the same things, and not
// trip over each other.

const claimRuns = 20

// fixture is the real engine and the processes the claim tests judge.
type fixture struct {
	drv *docker.Driver
	me  ledger.Identity
	// dead is a process of this boot that no longer runs.
	dead ledger.Identity
}

func (f *fixture) deadRecord() []byte {
	return recordOf(f.dead, backend.Docker, f.drv.Endpoint()).Marshal()
}

func (f *fixture) gone(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if containerExists(t, f.drv, n) {
			t.Errorf("container %s is still there; the sweep should have removed it", n)
		}
	}
}

// deadRuns writes n dead runs into cache, each listing one real running
// container labelled as its, and returns the run ids and the container
// names.
func deadRuns(t *testing.T, f *fixture, cache string, n int) (ids, ctrs []string) {
	t.Helper()
	runs := runsDir(t, cache)
	for range n {
		ids = append(ids, randHex(t, 8))
	}
	ctrs = startContainers(t, f.drv, "claim", ids)
	for i, c := range ctrs {
		writeRun(t, runs, ids[i], f.deadRecord(), []string{c}, nil)
	}
	return ids, ctrs
}

// outcome is what a sweep reported for one run.
type outcome struct {
	ID       string
	Decision reaper.Decision
	Reason   string
	Kept     int
}

func outcomes(rep *reaper.Report) []outcome {
	var out []outcome
	for _, rr := range rep.Runs {
		out = append(out, outcome{rr.ID, rr.Decision, rr.Reason, len(rr.Kept)})
	}
	return out
}

// checkClaims asserts that each run was reaped by exactly one of the
// sweeps, that the others lost the race in one of the two ways a loser
// can (or never saw the run), and that nothing is left: containers, run
// files, lock files.
func checkClaims(t *testing.T, f *fixture, cache string, ids, ctrs []string, reports ...[]outcome) {
	t.Helper()
	reaped := map[string]int{}
	lost := map[string]int{}
	for i, rep := range reports {
		for _, o := range rep {
			switch {
			case o.Decision == reaper.Reaped:
				reaped[o.ID]++
			case o.Decision == reaper.LeftAlone &&
				(strings.HasSuffix(o.Reason, "another process is reaping it") || strings.HasSuffix(o.Reason, "already reaped by another process")):
				lost[o.Reason[strings.LastIndex(o.Reason, "; ")+1:]]++
			default:
				t.Errorf("sweep %d: run %s: %s %q (%d kept): want reaped, or lost to the other sweep", i, o.ID, o.Decision, o.Reason, o.Kept)
			}
		}
	}
	for _, id := range ids {
		if reaped[id] != 1 {
			t.Errorf("run %s reaped %d times, want once", id, reaped[id])
		}
	}
	t.Logf("%d runs reaped once each; the losing sweep saw: %v", len(reaped), lost)
	f.gone(t, ctrs...)
	if left := listDir(t, filepath.Join(cache, ledger.RunsDir)); len(left) > 0 {
		t.Errorf("the runs folder still holds %q (lock files must not pile up)", left)
	}
}

func TestSweepClaimsEachRunOnce(t *testing.T) {
	f := &fixture{drv: openDocker(t), me: self(t), dead: deadProcess(t)}

	t.Run("goroutines", func(t *testing.T) {
		t.Parallel()
		cache := t.TempDir()
		ids, ctrs := deadRuns(t, f, cache, claimRuns)
		start := make(chan struct{})
		reps := make([][]outcome, 2)
		errs := make([]error, 2)
		done := make(chan int)
		for i := range reps {
			go func() {
				<-start
				rep, err := reaper.Sweep(context.Background(), f.drv, reaper.WithCacheDir(cache))
				if rep != nil {
					reps[i] = outcomes(rep)
				}
				errs[i] = err
				done <- i
			}()
		}
		close(start)
		<-done
		<-done
		for i, err := range errs {
			if err != nil {
				t.Errorf("sweep %d: %v", i, err)
			}
		}
		checkClaims(t, f, cache, ids, ctrs, reps...)
	})

	t.Run("processes", func(t *testing.T) {
		t.Parallel()
		cache := t.TempDir()
		ids, ctrs := deadRuns(t, f, cache, claimRuns)
		var hs []*proctest.Helper
		for range 2 {
			h := startHelper(t, "TestSweepHelper", "sweeper", cache, helperOpts{})
			hs = append(hs, h)
		}
		for _, h := range hs {
			h.Expect("waiting")
		}
		for _, h := range hs {
			h.Tell("go")
		}
		var reps [][]outcome
		for i, h := range hs {
			if e := h.Expect("error"); e != "" {
				t.Errorf("sweep in process %d: %s", i, e)
			}
			var rep []outcome
			if err := json.Unmarshal([]byte(h.Expect("report")), &rep); err != nil {
				t.Fatalf("process %d: report: %v", i, err)
			}
			reps = append(reps, rep)
		}
		checkClaims(t, f, cache, ids, ctrs, reps...)
	})
}

// TestSweepHelper is a sibling process: it opens the engine, waits for
// "go" on stdin, sweeps its cache dir and prints the report.
func TestSweepHelper(t *testing.T) {
	if role() != "sweeper" {
		t.Skip("helper process of TestSweepClaimsEachRunOnce")
	}
	drv := openDocker(t)
	cache, err := ledger.Dir()
	if err != nil {
		helperFail("cache dir: %v", err)
	}
	if err := proctest.WaitGo(); err != nil {
		helperFail("%v", err)
	}
	rep, err := reaper.Sweep(context.Background(), drv, reaper.WithCacheDir(cache))
	msg := ""
	if err != nil {
		msg = strings.ReplaceAll(err.Error(), "\n", " ")
	}
	proctest.Say("error", msg)
	b, _ := json.Marshal(outcomes(rep))
	proctest.Say("report", string(b))
}

// overlapBackend fails every removal (so the run it is asked about stays,
// and every sweep may try it again) and records how many removals were in
// flight at once.
type overlapBackend struct {
	stubBackend
	inflight, most, calls atomic.Int32
}

func (o *overlapBackend) Remove(_ context.Context, _ backend.Kind, _ string, names []string) []error {
	n := o.inflight.Add(1)
	for m := o.most.Load(); n > m && !o.most.CompareAndSwap(m, n); m = o.most.Load() {
	}
	o.calls.Add(1)
	for range 50 {
		runtime.Gosched() // a removal takes a while
	}
	o.inflight.Add(-1)
	errs := make([]error, len(names))
	for i := range errs {
		errs[i] = errors.New("permission denied")
	}
	return errs
}

// TestSweepClaimIsExclusive: sweeps started one after another, many at a
// time, over a run that stays (its removals fail): each may reap it in
// turn, never two at once. The holder of a claim removes the lock file
// before unlocking it; a sweeper that opened that file just before, and
// locks it just after, holds a lock on a file no longer at the path,
// while the next one creates and locks a new file there.
func TestSweepClaimIsExclusive(t *testing.T) {
	t.Parallel()
	f := &fixture{me: self(t), dead: deadProcess(t)}
	cache := t.TempDir()
	runs := runsDir(t, cache)
	writeRun(t, runs, "abcd0001", recordOf(f.dead, backend.Docker, "").Marshal(), []string{"rz-a"}, nil)
	b := &overlapBackend{stubBackend: stubBackend{name: backend.Docker}}
	var sweeps atomic.Int32
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := 0; i < 2000 && time.Now().Before(stop); i++ {
				rep, err := reaper.Sweep(context.Background(), b, reaper.WithCacheDir(cache))
				if err != nil {
					t.Error(err)
					return
				}
				sweeps.Add(1)
				if rr := rep.Runs[0]; rr.Decision != reaper.Kept && rr.Decision != reaper.LeftAlone {
					t.Errorf("%s: %s", rr.Decision, rr.Reason)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d sweeps, %d removals, at most %d at once", sweeps.Load(), b.calls.Load(), b.most.Load())
	if b.most.Load() > 1 {
		t.Errorf("%d sweeps were reaping the same run at once", b.most.Load())
	}
	if got := listDir(t, runs); !slices.Equal(got, []string{"abcd0001.json", "abcd0001.sandboxes"}) {
		t.Errorf("runs folder holds %q", got)
	}
}
