//go:build linux

package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// fateOf returns the fates of run in the rig's cache dir.
func (r *rig) fatesOf(run string) []ledger.FateFile {
	r.t.Helper()
	all, err := ledger.ReadFates(r.cache)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []ledger.FateFile
	for _, f := range all {
		if f.Run == run {
			out = append(out, f)
		}
	}
	return out
}

// checkFate checks that run has one fate, by by, that says each of the
// owner's sandboxes and networks was removed, with times, and names the
// owner.
func checkFate(t *testing.T, o *owner, fates []ledger.FateFile, by string) {
	t.Helper()
	if len(fates) != 1 {
		t.Fatalf("run %s has %d fates, want 1", o.run, len(fates))
	}
	f := fates[0]
	if f.Err != nil {
		b, _ := os.ReadFile(f.Path)
		t.Fatalf("run %s's fate cannot be read: %v\n%s", o.run, f.Err, b)
	}
	// As every other file of the cache dir: a fate names the owner's
	// command line.
	if fi, err := os.Stat(f.Path); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("the fate %s has mode %v, want 0600", f.Path, fi.Mode().Perm())
	}
	if f.By != by {
		t.Errorf("the fate says by %q, want %q", f.By, by)
	}
	if _, err := ledger.ParseISO(f.NoticedISO); err != nil {
		t.Errorf("the fate's noticedIso %q: %v", f.NoticedISO, err)
	}
	if f.Owner.PID != o.Pid() || f.Owner.Writer != "go" || !strings.Contains(f.Owner.Command, "TestOwner") {
		t.Errorf("the fate's owner is %+v, want pid %d, writer go, its command line", f.Owner, o.Pid())
	}
	got := map[string]ledger.Outcome{}
	for _, it := range f.Items {
		got[it.Kind+" "+it.Name] = it.Outcome
	}
	for _, n := range o.sandboxes {
		if got["sandbox "+n] != ledger.Removed {
			t.Errorf("the fate says sandbox %s: %q, want removed (items %+v)", n, got["sandbox "+n], f.Items)
		}
	}
	for _, n := range o.networks {
		if got["network "+n] != ledger.Removed {
			t.Errorf("the fate says network %s: %q, want removed (items %+v)", n, got["network "+n], f.Items)
		}
	}
}

// Row 16: what became of a crashed run is written down and told once.
// A SIGKILLed owner's watchdog (the script, then the native one) writes a
// fate naming each sandbox and network removed; with no watchdog, the next
// process's sweep writes it and that process tells it on stderr, and a
// third process tells nothing.
func TestRow16Fates(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	for _, tc := range []struct{ name, env, by string }{
		{"script watchdog", "RIGHTSIZE_WATCHDOG=script", "watchdog"},
		{"native watchdog", "RIGHTSIZE_WATCHDOG=native", "native watchdog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := r.sub(t)
			o := r.start("owner", harness.Plan{Containers: 2, Networks: 1}, tc.env).ready()
			o.kill()
			r.waitGone(o, "the watchdog")
			checkFate(t, o, r.fatesOf(o.run), tc.by)
			// The watchdog deletes the stub right after the run's files:
			// the last thing it does, a moment after the wait above ended.
			poll(t, goneWithin, "the owner's stub to go after a clean reap", func() (bool, string) {
				_, err := os.Stat(ledger.OwnerStubPath(r.cache, o.run))
				return os.IsNotExist(err), fmt.Sprint(err)
			})
		})
	}

	// A plain `go test ./...` hides a passing package's stderr: a fate told
	// only there stays untold, and the next process tells it again; the
	// CI job's summary (GITHUB_STEP_SUMMARY) is seen, and marks it told.
	// The processes have no terminal (a session of their own), as in CI.
	t.Run("told where it is seen", func(t *testing.T) {
		r := r.sub(t)
		// Every earlier fate of this cache dir is told first, so that the
		// next owners' lines are this run's alone.
		all, _ := ledger.ReadFates(r.cache)
		for _, f := range all {
			ledger.ClaimTell(f.Path)
		}
		noTTY := func(s *proctest.Spec) { s.Setsid = true }
		o := r.startWith("owner without a watchdog", harness.Plan{Containers: 2, Networks: 1}, noTTY, "RIGHTSIZE_REAPER=sweep").ready()
		o.kill()
		next := r.startWith("next process", harness.Plan{Containers: 1}, noTTY).ready()
		if d, why := next.sweepOf(o.run); d != "reaped" {
			t.Fatalf("the next process's sweep decided %q (%s), want reaped", d, why)
		}
		checkFate(t, o, r.fatesOf(o.run), "sweep")
		line := toldLine(t, next.Stderr(), o.run)
		if line == "" || !strings.Contains(line, "removed 2 sandboxes and 1 network") {
			t.Fatalf("the next process told %q of run %s, want a line saying 2 sandboxes and 1 network removed; its stderr:\n%s", line, o.run, next.Stderr())
		}
		t.Logf("told: %s", line)
		next.finish()
		if fs := r.fatesOf(o.run); len(fs) != 1 || fs[0].Told {
			t.Fatalf("the fate told only on a stderr go test may hide is marked told: %+v", fs)
		}

		summary := filepath.Join(t.TempDir(), "step_summary")
		if err := os.WriteFile(summary, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		inCI := r.startWith("process in CI", harness.Plan{Containers: 1}, noTTY, "GITHUB_STEP_SUMMARY="+summary).ready()
		if toldLine(t, inCI.Stderr(), o.run) == "" {
			t.Errorf("the untold fate was not told again:\n%s", inCI.Stderr())
		}
		inCI.finish()
		b, _ := os.ReadFile(summary)
		if !strings.Contains(string(b), "    rightsize: run "+o.run) || !strings.Contains(string(b), "removed 2 sandboxes and 1 network") {
			t.Errorf("the job's summary holds %q, want the fate's line", b)
		}
		if fs := r.fatesOf(o.run); len(fs) != 1 || !fs[0].Told {
			t.Errorf("the fate put in the job's summary is not marked told: %+v", fs)
		}

		third := r.startWith("third process", harness.Plan{Containers: 1}, noTTY).ready()
		if strings.Contains(third.Stderr(), "rightsize: run "+o.run) {
			t.Errorf("a third process told the fate again:\n%s", third.Stderr())
		}
		third.finish()
		r.waitGone(next, "the next process's own cleanup")
		r.waitGone(inCI, "the CI process's own cleanup")
		r.waitGone(third, "the third process's own cleanup")
	})

	t.Run("another member's run, reaped by Go", func(t *testing.T) {
		proctest.NeedHostPidNamespace(t) // a Node record names no pid namespace
		r := r.sub(t)
		id := newRunID(t)
		name := "rz-node-" + id
		r.sleeper(name, map[string]string{harness.LabelRunID: id}) // Node's one spelling
		runs := filepath.Join(r.cache, "runs")
		if err := os.MkdirAll(runs, 0o700); err != nil {
			t.Fatal(err)
		}
		// A Node record of a pid that no process has.
		rec, _ := json.Marshal(map[string]any{"pid": deadPID(t), "startedIso": time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04:05.000Z"), "backend": "docker"})
		if err := os.WriteFile(filepath.Join(runs, id+".json"), rec, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(runs, id+".sandboxes"), []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
		next := r.start("next process", harness.Plan{Containers: 1}).ready()
		fs := r.fatesOf(id)
		if len(fs) != 1 || fs[0].By != "sweep" || fs[0].Owner.Writer != "" || len(fs[0].Items) != 1 || fs[0].Items[0].Outcome != ledger.Removed {
			t.Errorf("the Node run's fate: %+v, want one by the sweep, its container removed", fs)
		}
		if !strings.Contains(next.Stderr(), "rightsize: run "+id) || !strings.Contains(next.Stderr(), "another member's run") {
			t.Errorf("the next process did not tell the Node run's fate:\n%s", next.Stderr())
		}
		next.finish()
		r.waitGone(next, "the next process's own cleanup")
	})
}

// toldLine is the line of stderr that tells run's fate, "" when none; a
// fate told twice by one process fails the test.
func toldLine(t *testing.T, stderr, run string) string {
	t.Helper()
	line := ""
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "rightsize: run "+run) {
			if line != "" {
				t.Errorf("the fate was told twice by one process:\n%s\n%s", line, l)
			}
			line = l
		}
	}
	return line
}

// deadPID is the pid of a process that ran and was reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// Staggered deaths: each owner is SIGKILLed as the next one starts, so
// the next one's first sweep finds the dead run while its watchdog is
// still reaping it. Each death gets one fate, the watchdog's, naming its
// owner (not "another member's run").
func TestStaggeredDeathsOneFateEach(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	const n = 4
	var dead []*owner
	prev := r.start("owner 0", harness.Plan{Containers: 1, Networks: 1}).ready()
	for i := 1; i <= n; i++ {
		prev.kill()
		dead = append(dead, prev)
		prev = r.start(fmt.Sprintf("owner %d", i), harness.Plan{Containers: 1, Networks: 1}).ready()
		if d, why := prev.sweepOf(dead[len(dead)-1].run); d == "reaped" {
			t.Logf("owner %d's sweep reaped run %s beside its watchdog (%s)", i, dead[len(dead)-1].run, why)
		}
	}
	prev.finish()
	for _, o := range append(dead, prev) {
		r.waitGone(o, "the watchdog")
	}
	for _, o := range dead {
		wd := o.watchdog
		proctest.WaitUntil(t, goneWithin, fmt.Sprintf("watchdog %d of %s to exit", wd, o.name), func() bool {
			return wd <= 0 || syscall.Kill(wd, 0) != nil
		})
		fs := r.fatesOf(o.run)
		for _, f := range fs {
			t.Logf("run %s: %s", o.run, reaper.FateLine(f))
		}
		checkFate(t, o, fs, "watchdog")
	}
}
