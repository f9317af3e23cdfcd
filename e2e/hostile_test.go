//go:build linux

package e2e_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/ledger"
)

// hostileLines are ledger lines that would run a command, pass an option
// or name something outside the run if any of them reached a shell or a
// command line as anything but a rejected line. Each command would create
// a file in markDir (or "rzmark-*" in the working directory).
func hostileLines(markDir string) []string {
	m := func(n string) string { return filepath.Join(markDir, n) }
	bin := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(13, 13))
	for i := range bin {
		bin[i] = byte(rng.UintN(256))
	}
	return []string{
		"$(touch " + m("dollar") + ")",
		"`touch " + m("backtick") + "`",
		"; touch " + m("semicolon"),
		"| touch " + m("pipe"),
		"&& touch " + m("and"),
		"rz-x;touch${IFS}" + m("ifs"),
		"rz-y$(touch${IFS}" + m("ifs2") + ")",
		"$(touch rzmark-rel)",
		"rz-z;touch rzmark-rel2",
		"-rf",
		"--help",
		"-f",
		"--filter=label=" + harness.LabelRunID,
		"-v /:/host",
		"--rm",
		"../../../../etc/passwd",
		"/etc/passwd",
		"rz a b",
		"rz-ä",
		"*",
		"~",
		"$HOME",
		"'quoted'",
		`"dq"`,
		"rz-nul\x00tail",
		"rz-tab\tx",
		"\x1b[31mred\x1b[0m",
		"rz-" + strings.Repeat("A", 10<<20), // a 10 MB line
		string(bin),                         // binary, with NULs and newlines
		"rz-doesnotexist-1",                 // valid, never existed: "not found"
	}
}

// appendLines appends lines to a line file, as a writer other than the
// ledger might.
func appendLines(t *testing.T, path string, lines []string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l + "\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// noMarks fails the test if any command from the hostile lines ran.
func noMarks(t *testing.T, markDir string, dirs ...string) {
	t.Helper()
	if es, _ := os.ReadDir(markDir); len(es) > 0 {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Errorf("a command from the hostile ledger ran: %s holds %q", markDir, names)
	}
	for _, d := range dirs {
		for _, n := range []string{"rzmark-rel", "rzmark-rel2", "rzmark-stem", "rzmark-stem2"} {
			if _, err := os.Lstat(filepath.Join(d, n)); err == nil {
				t.Errorf("a command from the hostile ledger ran: %s exists", filepath.Join(d, n))
			}
		}
	}
}

// Row 13: a hostile ledger (shell metacharacters, options, newlines, a
// 10 MB line, binary, short prefixes of a live container's id, hostile
// file names, symbolic links) through the sweep and through the watchdog:
// no command runs from it, nothing crashes, nothing outside the run is
// touched, and everything that carries the run's label is still removed.
// What cannot be judged (an unreadable record) is left alone, and a list
// past its bounds is never parsed.
func TestRow13HostileLedger(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	markDir := t.TempDir()
	lines := hostileLines(markDir)
	// Short prefixes of the bystander's container id: an engine resolves a
	// unique prefix to that container, so a list passing one on would
	// remove a live process's sandbox.
	byID, err := r.eng.ContainerID(t.Context(), r.by.sandboxes[0])
	if err != nil {
		t.Fatal(err)
	}
	lines = append(lines, byID[:4], byID[:8], byID[:11])
	runs := harness.RunsDir(r.cache)
	cwd, _ := os.Getwd()
	me, err := ledger.Self()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := r.by.get("endpoint")
	// deadRec is a record of this process with another start: dead.
	deadRec := ledger.Record{PID: me.PID, StartedISO: ledger.FormatISO(me.Start), Backend: "docker", StartTicks: me.StartTicks + 1,
		BootID: me.BootID, PidNamespace: me.PidNamespace, Endpoint: endpoint, Writer: "go"}.Marshal()
	_, _, byNets := ledger.Paths(runs, r.by.run)
	byRec, _, _ := ledger.Paths(runs, r.by.run)

	t.Run("sweep", func(t *testing.T) {
		r := r.sub(t)
		// A real dead run, its lists made hostile.
		o := r.start("owner (session killed)", harness.Plan{Containers: 2, Networks: 1}).ready()
		o.killSession()
		_, sbx, nets := ledger.Paths(runs, o.run)
		appendLines(t, sbx, lines)
		appendLines(t, nets, lines)

		// An abandoned run: a binary record two hours old.
		abandoned, abandonedCtr := r.fakeRun([]byte("\x00\xff{\"pid\":\x00 not json\n$(touch " + filepath.Join(markDir, "record") + ")"))
		rec, asbx, _ := ledger.Paths(runs, abandoned)
		appendLines(t, asbx, lines[:10])
		old := time.Now().Add(-2 * time.Hour)
		if err := os.Chtimes(rec, old, old); err != nil {
			t.Fatal(err)
		}

		// A run whose .networks is a symbolic link to the bystander's.
		linked, linkedCtr := r.fakeRun(deadRec)
		_, _, lnets := ledger.Paths(runs, linked)
		if err := os.Symlink(byNets, lnets); err != nil {
			t.Fatal(err)
		}

		// A run whose record is a symbolic link to the bystander's.
		linkedRec, linkedRecCtr := r.fakeRun(nil)
		lrec, _, _ := ledger.Paths(runs, linkedRec)
		if err := os.Symlink(byRec, lrec); err != nil {
			t.Fatal(err)
		}

		// Dead runs under hostile file names: any stem is a run id.
		stems := []string{"-rf", "--help", "$(touch rzmark-stem)", "a;touch rzmark-stem2", "rz run", "x\ny", "\x1b[31m"}
		stemCtr := map[string]string{}
		for _, s := range stems {
			id, ctr := r.fakeRun(deadRec)
			for _, f := range harness.RunFiles(r.cache, id) {
				ext := filepath.Ext(f)
				if err := os.Rename(filepath.Join(runs, f), filepath.Join(runs, s+ext)); err != nil {
					t.Fatal(err)
				}
			}
			stemCtr[s] = ctr
		}

		s := r.start("next first use", harness.Plan{Containers: 1}).ready()
		want := func(id, decision string) {
			t.Helper()
			d, why := s.sweepOf(id)
			if d != decision {
				t.Errorf("run %q: %s (%s), want %s", id, d, why, decision)
			} else {
				t.Logf("run %q: %s: %s", id, d, why)
			}
		}
		gone := func(what, name string, wantGone bool) {
			t.Helper()
			exists, _, err := r.eng.ContainerState(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			if exists == wantGone {
				t.Errorf("%s: container %s exists=%v, want gone=%v", what, name, exists, wantGone)
			}
		}
		// Its lists are past their bounds (a 10 MB line): not one line is
		// read, yet everything with its label goes; its files stay.
		want(o.run, "kept")
		if _, why := s.sweepOf(o.run); !strings.Contains(why, "oversized") {
			t.Errorf("the hostile run's reason %q does not say its list is oversized", why)
		}
		for _, n := range append(o.sandboxes, o.networks...) {
			if exists, _, _ := r.eng.ContainerState(t.Context(), n); exists {
				t.Errorf("the hostile dead run's container %s is still there", n)
			}
		}
		// An unreadable record is never reaped by age: its owner is unknown.
		want(abandoned, "left alone")
		gone("abandoned run", abandonedCtr, false)
		want(linked, "kept")
		gone("run with a linked .networks", linkedCtr, true)
		if _, err := os.Lstat(lnets); err != nil {
			t.Errorf("the linked .networks is gone (%v): an unread list must stay", err)
		}
		want(linkedRec, "left alone")
		gone("run with a linked record", linkedRecCtr, false)
		// Renamed runs list containers labelled with another run's id:
		// not theirs, so left running; their files go.
		for _, st := range stems {
			want(st, "reaped")
			gone("run "+st, stemCtr[st], false)
		}
		// Short prefixes of the bystander's id never reach the engine.
		r.by.checkAlive("the bystander, after a sweep of hostile lists")
		noMarks(t, markDir, "/", cwd, r.cache, runs)
		s.finish()
		// What the product keeps by design goes by hand.
		for _, id := range []string{o.run, abandoned, linked, linkedRec} {
			if err := ledger.RemoveRunFiles(runs, id); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("watchdog", func(t *testing.T) {
		r := r.sub(t)
		o := r.start("owner with a hostile ledger", harness.Plan{Containers: 2, Networks: 1}).ready()
		_, sbx, nets := ledger.Paths(runs, o.run)
		appendLines(t, sbx, lines)
		appendLines(t, nets, lines)
		o.kill()
		// The watchdog removes what the owner told it and what carries
		// the run's label. Of the lists it asks only for the names it was
		// not told, read as a sweep reads them (a line that is no valid
		// name never reaches the engine; a valid one is removed only where
		// the engine shows it the run's): here both lists are past their
		// bounds, so it reads none of them.
		took := r.waitGone(o, "the watchdog, through a hostile ledger")
		log := r.watchdogLog(o.run)
		t.Logf("hostile lists: everything removed in %s; the watchdog said: %s", ms(took), strings.ReplaceAll(strings.TrimSpace(log), "\n", " / "))
		poll(t, goneWithin, "the watchdog to finish", func() (bool, string) {
			return syscall.Kill(o.watchdog, 0) == syscall.ESRCH, r.watchdogLog(o.run)
		})
		r.by.checkAlive("the bystander, after a watchdog read hostile lists")

		// A .networks made a symbolic link to the bystander's: never
		// read, and removed as a link with the run's files; the
		// bystander's network and its list stay.
		o2 := r.start("owner with a linked .networks", harness.Plan{Containers: 1, Networks: 1}).ready()
		_, _, nets2 := ledger.Paths(runs, o2.run)
		if err := os.Remove(nets2); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(byNets, nets2); err != nil {
			t.Fatal(err)
		}
		o2.kill()
		poll(t, goneWithin, "the watchdog to finish", func() (bool, string) {
			return syscall.Kill(o2.watchdog, 0) == syscall.ESRCH, r.watchdogLog(o2.run)
		})
		for _, n := range append(o2.sandboxes, o2.networks...) {
			if exists, _, _ := r.eng.ContainerState(t.Context(), n); exists {
				t.Errorf("the watchdog left %s because of a linked .networks", n)
			}
		}
		if _, err := os.Stat(byNets); err != nil {
			t.Errorf("the bystander's .networks: %v", err)
		}
		r.by.checkAlive("the bystander, after a linked .networks")
		t.Logf("linked .networks: %s", strings.ReplaceAll(strings.TrimSpace(r.watchdogLog(o2.run)), "\n", " / "))

		// Lists within their bounds that name the bystander's sandboxes
		// and networks, which the owner never told: the watchdog asks for
		// each by name, and the engine shows none of them the run's.
		o3 := r.start("owner whose lists name the bystander's", harness.Plan{Containers: 1, Networks: 1}).ready()
		_, sbx3, nets3 := ledger.Paths(runs, o3.run)
		appendLines(t, sbx3, r.by.sandboxes)
		appendLines(t, nets3, r.by.networks)
		o3.kill()
		poll(t, goneWithin, "the watchdog to finish", func() (bool, string) {
			return syscall.Kill(o3.watchdog, 0) == syscall.ESRCH, r.watchdogLog(o3.run)
		})
		for _, n := range o3.sandboxes {
			if exists, _, err := r.eng.ContainerState(t.Context(), n); exists || err != nil {
				t.Errorf("the watchdog left container %s (%v), its run's lists naming the bystander's", n, err)
			}
		}
		for _, n := range o3.networks {
			if exists, err := r.eng.NetworkExists(t.Context(), n); exists || err != nil {
				t.Errorf("the watchdog left network %s (%v), its run's lists naming the bystander's", n, err)
			}
		}
		r.by.checkAlive("the bystander, named in a dead run's lists its watchdog read")
		t.Logf("lists naming the bystander's: %s", strings.ReplaceAll(strings.TrimSpace(r.watchdogLog(o3.run)), "\n", " / "))
		noMarks(t, markDir, "/", cwd, r.cache, runs)
	})
}
