//go:build linux

package e2e_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/proctree"
)

// liveProcesses lists the live processes carrying the run's mark.
func liveProcesses(run string) []int { return proctree.Live(proctree.OfRun(run)) }

// treesUp waits until the run's n trees of `sh -c 'sleep 1000 & sleep
// 1000'` have each started their two sleeps (the shell itself may or may
// not stay: at least 2n processes), and returns them.
func treesUp(t *testing.T, run string, n int) []int {
	t.Helper()
	var live []int
	poll(t, time.Minute, "the run's process trees to be up", func() (bool, string) {
		live = liveProcesses(run)
		return len(live) >= 2*n, fmt.Sprint(live)
	})
	return live
}

// Row 17: local process trees (sandboxtest.StartProcess: `sh -c 'sleep
// 1000 & sleep 1000'`, a command and its child) end with their test
// binary, however it dies: SIGKILL (its watchdog), `go test -timeout`,
// and, with no watchdog, at the next process's first use (its sweep). A
// process of the tree that left its session (setsid) is never signalled:
// the watchdog ends the rest, tells it as escaped in the run's fate, and
// keeps the run's files until it is gone.
func TestRow17Processes(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	plan := harness.Plan{Processes: 2}

	t.Run("SIGKILL", func(t *testing.T) {
		r := r.sub(t)
		o := r.start("owner with processes", plan).ready()
		treesUp(t, o.run, 2)
		killed := time.Now()
		o.kill()
		poll(t, goneWithin, "the run's processes to end", func() (bool, string) {
			left := liveProcesses(o.run)
			return len(left) == 0, fmt.Sprint(left)
		})
		t.Logf("SIGKILL of the owner → its 2 process trees gone %s after the kill", ms(time.Since(killed)))
		r.waitGone(o, "the watchdogs")
	})

	t.Run("go test -timeout", func(t *testing.T) {
		r := r.sub(t)
		o := r.startWith("owner with processes, -timeout", plan, func(s *proctest.Spec) {
			s.Argv = proctest.TestArgv("TestOwner", "-test.timeout=5s")
		}).ready()
		treesUp(t, o.run, 2)
		if !o.Wait(time.Minute) {
			t.Fatal("the owner did not time out")
		}
		r.waitGone(o, "the watchdog, after -timeout")
	})

	t.Run("a process that escaped", func(t *testing.T) {
		if _, err := exec.LookPath("setsid"); err != nil {
			t.Skip("no setsid(1) here")
		}
		r := r.sub(t)
		o := r.start("owner with an escaping process", harness.Plan{Processes: 1, EscapeProcess: true}).ready()
		var escaped int
		poll(t, time.Minute, "the tree and its escaped process to be up", func() (bool, string) {
			live := liveProcesses(o.run)
			escaped = 0
			for _, pid := range live {
				if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); string(b) == "sleep\x001001\x00" {
					escaped = pid
				}
			}
			return escaped != 0 && len(live) >= 3, fmt.Sprint(live)
		})
		t.Cleanup(func() {
			if escaped != 0 { // not killed below: end it, once
				_ = syscall.Kill(escaped, syscall.SIGKILL)
			}
		})
		o.kill()
		poll(t, goneWithin, "the tree to end, all but the escaped process", func() (bool, string) {
			left := liveProcesses(o.run)
			return slices.Equal(left, []int{escaped}), fmt.Sprint(left)
		})
		var fate string
		poll(t, goneWithin, "the run's fate to tell the escaped process", func() (bool, string) {
			for _, f := range r.fatesOf(o.run) {
				for _, it := range f.Items {
					if it.Outcome == ledger.Escaped && it.ID == strconv.Itoa(escaped) {
						fate = fmt.Sprintf("%s %s (%s): %s (%s)", it.Kind, it.ID, it.Name, it.Outcome, it.Note)
						return true, ""
					}
				}
			}
			return false, fmt.Sprint(r.fatesOf(o.run))
		})
		t.Logf("fate: %s", fate)
		if err := syscall.Kill(escaped, 0); err != nil {
			t.Fatalf("the escaped process %d was signalled: %v", escaped, err)
		}
		if files := harness.RunFiles(r.cache, o.run); len(files) == 0 {
			t.Error("the run's files were deleted while one of its processes lives")
		}
		// Once it is gone, the next process's sweep finishes the run.
		_ = syscall.Kill(escaped, syscall.SIGKILL)
		escaped = 0 // its pid may be another process's from now on
		poll(t, goneWithin, "the escaped process to be gone", func() (bool, string) {
			return len(liveProcesses(o.run)) == 0, ""
		})
		// A sweep leaves a dead run to a watchdog of it that still lives
		// (one death, one fate): the next process comes once they are done.
		r.waitWatchdogsDone(o)
		next := r.start("next process", harness.Plan{Processes: 1}).ready()
		if d, why := next.sweepOf(o.run); d != "reaped" {
			t.Errorf("the next process's sweep decided %q (%s), want reaped", d, why)
		}
		next.finish()
		r.waitGone(next, "the next process's own cleanup")
		r.waitGone(o, "the sweep")
	})

	t.Run("no watchdog: the next sweep", func(t *testing.T) {
		r := r.sub(t)
		o := r.start("owner with processes, no watchdog", plan, "RIGHTSIZE_REAPER=sweep").ready()
		before := treesUp(t, o.run, 2)
		o.kill()
		after := liveProcesses(o.run)
		for _, pid := range before {
			if !slices.Contains(after, pid) {
				t.Fatalf("right after the kill, with no watchdog, the run's processes are %v, want all of %v still there", after, before)
			}
		}
		next := r.start("next process", harness.Plan{Processes: 1}).ready()
		if d, why := next.sweepOf(o.run); d != "reaped" {
			t.Errorf("the next process's sweep decided %q (%s), want reaped", d, why)
		}
		if left := liveProcesses(o.run); len(left) != 0 {
			t.Errorf("after the next process's sweep, the dead run's processes %v live", left)
		}
		treesUp(t, next.run, 1)
		next.finish()
		r.waitGone(next, "the next process's own cleanup")
		r.waitGone(o, "the sweep")
	})
}

// TestProcessKillToGoneFigures is a measuring harness, not a check: with
// RIGHTSIZE_BENCH_PROCESSES=<runs>, for 1 and 20 process trees, it starts
// an owner, waits until every tree is up, SIGKILLs the owner and polls
// (every 1 ms) until no process carrying the run's mark is left; it logs
// the median and p95 of kill-to-gone. The watchdog is the owner's native
// watchdog of processes (the main one being the script).
//
//	RIGHTSIZE_BENCH_PROCESSES=20 go test -count=1 -run TestProcessKillToGoneFigures -v ./e2e
func TestProcessKillToGoneFigures(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("RIGHTSIZE_BENCH_PROCESSES"))
	if runs <= 0 {
		t.Skip("a measuring harness: set RIGHTSIZE_BENCH_PROCESSES=<runs>")
	}
	r := newBareRig(t)
	for _, trees := range []int{1, 20} {
		var took []time.Duration
		for range runs {
			o := r.start("owner", harness.Plan{Processes: trees}).ready()
			treesUp(t, o.run, trees)
			killed := time.Now()
			o.kill()
			for len(liveProcesses(o.run)) > 0 {
				if time.Since(killed) > goneWithin {
					t.Fatalf("%d trees: still there after %s", trees, goneWithin)
				}
				time.Sleep(time.Millisecond)
			}
			took = append(took, time.Since(killed))
			r.waitGone(o, "the watchdogs")
		}
		slices.Sort(took)
		median := (took[(len(took)-1)/2] + took[len(took)/2]) / 2
		p95 := took[min(len(took)-1, int(math.Ceil(0.95*float64(len(took))))-1)]
		load, _ := os.ReadFile("/proc/loadavg")
		t.Logf("%d process trees (sh + 2 sleeps each), %d runs: kill-to-gone median %s, p95 %s (load %s)", trees, runs, ms(median), ms(p95), strings.Fields(string(load))[0])
	}
}
