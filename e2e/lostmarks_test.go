//go:build linux

package e2e_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctree"
)

// lostIDs reads what an owner of a harness.Plan{LostMarks: true} said of
// the processes that lost their mark, by key, and registers the end of
// those still alive when the test ends (each checked by its start, so
// that no pid passed to another process is killed).
func lostIDs(t *testing.T, o *owner, keys ...string) []string {
	t.Helper()
	var ids []string
	for _, k := range keys {
		v := o.get(k)
		if v == "" {
			t.Fatalf("%s said nothing under %s\n%s", o.name, k, o.say())
		}
		ids = append(ids, strings.Split(v, ",")...)
	}
	t.Cleanup(func() { killLost(ids) })
	return ids
}

// killLost SIGKILLs the processes of ids that are still the processes
// the ids name.
func killLost(ids []string) {
	for _, id := range ids {
		if harness.Alive(id) {
			pid, _, _ := proctree.ParseID(id)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// aliveOf lists the ids of ids whose processes are alive.
func aliveOf(ids []string) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !harness.Alive(id) })
}

// allLost is every key of harness.LostMarkCommands.
func allLost() []string {
	var keys []string
	for _, c := range harness.LostMarkCommands {
		keys = append(keys, c.Key)
	}
	return keys
}

// fateOfProcess returns the items of run's fates about the process of id.
func (r *rig) fateOfProcess(run, id string) []ledger.FateItem {
	pid, _, _ := proctree.ParseID(id)
	var out []ledger.FateItem
	for _, f := range r.fatesOf(run) {
		for _, it := range f.Items {
			if it.Kind == "process" && it.ID == strconv.Itoa(pid) {
				out = append(out, it)
			}
		}
	}
	return out
}

// Row 18: local processes that lose their mark (RIGHTSIZE_PROCESS in
// their environment) — perl writing its title over it, as PostgreSQL,
// nginx and Redis do, and a child started with `env -i` — end with their
// test binary all the same, each found by its command's process group:
// orphans (double forks) of a command whose leader lives, of one whose
// leader exited at once, and a command that rewrote its own title. With
// either watchdog that serves processes: the native one of processes
// beside the script watchdog, and the native watchdog of everything.
// Without a watchdog, the next sweep ends what it can prove (a group
// whose leader lives) and reports, without signalling, what it cannot (a
// group whose leader is gone), keeping the run until it is gone. A child
// without the mark that leaves its group and session is told as escaped
// in the run's fate, and never signalled.
func TestRow18LostMarks(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("no perl here: the title rewrite needs it")
	}
	t.Parallel()
	r := newBareRig(t)
	plan := harness.Plan{LostMarks: true}

	for _, wd := range []string{"script", "native"} {
		t.Run("SIGKILL, "+wd+" watchdog", func(t *testing.T) {
			r := r.sub(t)
			// A container first, so that the watchdog of the run is
			// started, and of its kind, before the processes.
			o := r.start("owner with processes without their mark", harness.Plan{Containers: 1, LostMarks: true}, "RIGHTSIZE_WATCHDOG="+wd).ready()
			if kind := o.get("watchdog.kind"); kind != wd {
				t.Skipf("the owner's watchdog is %q (no /bin/sh here?), not the %s one", kind, wd)
			}
			lost := lostIDs(t, o, allLost()...)
			o.kill()
			poll(t, goneWithin, "the processes without the mark to end", func() (bool, string) {
				left := aliveOf(lost)
				return len(left) == 0, fmt.Sprint(left)
			})
			r.waitGone(o, "the watchdogs")
			for _, id := range lost {
				items := r.fateOfProcess(o.run, id)
				if len(items) != 1 || items[0].Outcome != ledger.Ended || !strings.Contains(items[0].Note, "no mark") {
					t.Errorf("the fate of process %s: %+v, want one item ended, saying it had no mark", id, items)
				}
			}
		})
	}

	t.Run("an escaped child without the mark", func(t *testing.T) {
		if _, err := exec.LookPath("setsid"); err != nil {
			t.Skip("no setsid(1) here")
		}
		r := r.sub(t)
		o := r.start("owner with an escaping child without the mark", harness.Plan{LostMarks: true, EscapeProcess: true}).ready()
		lost := lostIDs(t, o, allLost()...)
		escaped := lostIDs(t, o, "lost.escaped")[0]
		o.kill()
		poll(t, goneWithin, "all but the escaped child to end", func() (bool, string) {
			left := aliveOf(lost)
			return len(left) == 0, fmt.Sprint(left)
		})
		poll(t, goneWithin, "the run's fate to tell the escaped child", func() (bool, string) {
			items := r.fateOfProcess(o.run, escaped)
			return len(items) == 1 && items[0].Outcome == ledger.Escaped, fmt.Sprint(items)
		})
		if !harness.Alive(escaped) {
			t.Fatalf("the escaped child %s was signalled", escaped)
		}
		if files := harness.RunFiles(r.cache, o.run); len(files) == 0 {
			t.Error("the run's files were deleted while a process of it lives")
		}
		killLost([]string{escaped})
		poll(t, goneWithin, "the escaped child to be gone", func() (bool, string) { return !harness.Alive(escaped), "" })
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
		o := r.start("owner without a watchdog", plan, "RIGHTSIZE_REAPER=sweep").ready()
		proven := lostIDs(t, o, "lost.leader", "lost.perl")
		unproven := lostIDs(t, o, "lost.gone")
		o.kill()
		if left := aliveOf(append(slices.Clone(proven), unproven...)); len(left) != len(proven)+len(unproven) {
			t.Fatalf("right after the kill, with no watchdog, only %v of the processes live", left)
		}
		// Until init reaps the exited command's zombie (reparented to it
		// with the owner's death), the zombie proves its group.
		gone := o.get("lost.gone.command")
		poll(t, goneWithin, "init to reap the exited command "+gone, func() (bool, string) { return !harness.Exists(gone), "" })
		next := r.start("next process", harness.Plan{Processes: 1}).ready()
		if d, why := next.sweepOf(o.run); d != "kept" {
			t.Errorf("the next process's sweep decided %q (%s), want kept: a group it cannot prove lives", d, why)
		}
		if kept := next.get(harness.ReportKey("sweep.kept", o.run)); !strings.Contains(kept, "nothing proves") {
			t.Errorf("the sweep kept %q; want the processes it cannot prove, said so", kept)
		}
		if left := aliveOf(proven); len(left) > 0 {
			t.Errorf("after the sweep, processes of groups it can prove live: %v", left)
		}
		if left := aliveOf(unproven); len(left) != len(unproven) {
			t.Errorf("the sweep signalled what it cannot prove: only %v of %v live", left, unproven)
		}
		next.finish()
		r.waitGone(next, "the next process's own cleanup")

		// Once they are gone, the sweep after reaps the run.
		killLost(unproven)
		poll(t, goneWithin, "the unproven processes to be gone", func() (bool, string) { return len(aliveOf(unproven)) == 0, "" })
		last := r.start("the process after", harness.Plan{Processes: 1}).ready()
		if d, why := last.sweepOf(o.run); d != "reaped" {
			t.Errorf("the sweep after decided %q (%s), want reaped", d, why)
		}
		last.finish()
		r.waitGone(last, "its own cleanup")
		r.waitGone(o, "the sweeps")
	})
}
