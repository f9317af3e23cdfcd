//go:build linux

package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// nsInit is the init of the owner's pid namespace: it runs the owner in
// the background with the namespace's stdin (an asynchronous command's
// stdin would otherwise be /dev/null), then waits forever, so that the
// namespace, and the owner's watchdog in it, outlive the owner.
const nsInit = `exec 3<&0; "$@" <&3 3<&- & while :; do sleep 1; done`

// hostPID finds the pid, in this pid namespace, of the process that is
// nsPid in pid namespace ns ("pid:[4026532181]").
func hostPID(ns string, nsPid int) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err != nil || l != ns {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 && f[len(f)-1] == strconv.Itoa(nsPid) {
					return pid, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no process is pid %d of %s", nsPid, ns)
}

// takeNamespaceNumber makes new pid namespaces, a sleep their first
// process, until one has the number of ns, whose processes are gone, and
// reports whether one did (a few tries; a namespace made elsewhere may
// take it first). The ones made are ended at the test's end.
func takeNamespaceNumber(t *testing.T, unshare, ns string) bool {
	t.Helper()
	mine, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	for try := range 8 {
		cmd := exec.Command(unshare, "--pid", "--fork", "--kill-child", "sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		// unshare's children's namespace is the new one once it unshared.
		var got string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			got, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid_for_children", cmd.Process.Pid))
			if err == nil && got != mine {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("unshare (pid %d) made no pid namespace within 10 s: %q, %v", cmd.Process.Pid, got, err)
			}
		}
		if got == ns {
			// Its first process, the sleep, must run before the sweep.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, err := hostPID(ns, 1); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the namespace now numbered %s has no first process within 10 s", ns)
				}
			}
			t.Logf("the namespace made by try %d has the number %s: a newer namespace under the owner's", try+1, ns)
			return true
		}
	}
	t.Logf("none of 8 new namespaces got the number %s (another took it first); the sweep finds it empty", ns)
	return false
}

// Row 10: an owner in another pid namespace (unshare --pid --fork
// --mount-proc, the real code writing its record from inside). From the
// host's namespace, which sees every process, a sweep finds the owner by
// its namespace and its pid in it, and leaves a live one alone; the
// owner's watchdog, in the namespace with it, still removes everything
// after a SIGKILL. When the whole namespace dies (its init killed, so the
// watchdog with it, as when a CI job's container is killed), the next
// sweep from the host proves it dead — no process is left in it — and
// reaps it. And the other way round: a sweeper inside a child namespace
// leaves alone a record that names no namespace (another member's) of a
// live process of the host, whose pid it cannot look up.
func TestRow10PidNamespace(t *testing.T) {
	proctest.NeedHostPidNamespace(t) // judges child namespaces as the host does
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare command: cannot make a pid namespace")
	}
	if out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare --pid --fork --mount-proc is not permitted here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	me, err := ledger.Self()
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	inNS := func(s *proctest.Spec) {
		s.Argv = append([]string{unshare, "--pid", "--fork", "--mount-proc", "/bin/sh", "-c", nsInit, "sh"}, s.Argv...)
	}
	// start starts an owner in a new pid namespace and returns it, its
	// namespace, its pid as seen from here and its pid there.
	start := func(r *rig, name string) (*owner, string, int, int) {
		o := r.startWith(name, harness.Plan{Containers: 2, Networks: 1}, inNS).ready()
		b, err := os.ReadFile(ledger.OwnRecordPath(harness.RunsDir(r.cache), o.run))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			PID          int    `json:"pid"`
			PidNamespace string `json:"pidNamespace"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.PidNamespace == "" || rec.PidNamespace == me.PidNamespace {
			t.Fatalf("the record written in the new namespace says pidNamespace %q (this process is in %s): %s", rec.PidNamespace, me.PidNamespace, b)
		}
		pid, err := hostPID(rec.PidNamespace, rec.PID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: pid %d in %s is pid %d here (in %s)", name, rec.PID, rec.PidNamespace, pid, me.PidNamespace)
		r.t.Cleanup(func() {
			// unshare does not pass a SIGKILL on: end the namespace itself.
			if init, err := hostPID(rec.PidNamespace, 1); err == nil {
				_ = syscall.Kill(init, syscall.SIGKILL)
			}
		})
		return o, rec.PidNamespace, pid, rec.PID
	}
	sweepFromHere := func(r *rig, o *owner, when, decision, because string) {
		t.Helper()
		s := r.start("sweeper here ("+when+")", harness.Plan{Containers: 1}).ready()
		d, why := s.sweepOf(o.run)
		if d != decision || !strings.Contains(why, because) {
			t.Errorf("%s: the sweep from here decided %q (%s), want %s (%s); it kept: %s", when, d, why, decision, because, s.get(harness.ReportKey("sweep.kept", o.run)))
		} else {
			t.Logf("%s: %s: %s", when, d, why)
		}
		s.finish()
	}

	t.Run("owner killed", func(t *testing.T) {
		r := r.sub(t)
		o, _, pid, _ := start(r, "owner in a pid namespace")
		sweepFromHere(r, o, "owner alive", "left alone", "recorded start")
		o.checkAlive("the owner in the namespace, after a sweep from here")
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		took := r.waitGone(o, "the watchdog in the namespace, after SIGKILL of its owner")
		t.Logf("SIGKILL of the owner in the namespace → its watchdog removed everything in %s (%s after the kill)", ms(took), ms(time.Since(killed)))
	})

	t.Run("namespace torn down", func(t *testing.T) {
		r := r.sub(t)
		o, ns, _, inner := start(r, "owner in a pid namespace")
		initPID, err := hostPID(ns, 1)
		if err != nil {
			t.Fatal(err)
		}
		// The init's death kills every process of the namespace: the owner
		// and its watchdog, together.
		if err := syscall.Kill(initPID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if !o.Wait(exitWithin) {
			t.Fatal("the namespace did not end")
		}
		// The kernel gives the freed number to the next namespace made
		// (on CI, often a container's): take it, when this test can, so
		// that the sweep finds a newer namespace under the owner's.
		reused := takeNamespaceNumber(t, unshare, ns)
		// The namespace's processes are gone; the sweep of a fresh process
		// here proves it and reaps the run.
		because := "no process is left in pid namespace " + ns
		if reused {
			because += fmt.Sprintf(", where pid %d ran: its number now names a newer namespace", inner)
		}
		sweepFromHere(r, o, "namespace gone", "reaped", because)
		took := r.waitGone(o, "the sweep from the host, after the namespace died")
		t.Logf("namespace torn down → its run reaped from the host in %s", ms(took))
	})

	t.Run("sweeper in a child namespace", func(t *testing.T) {
		r := r.sub(t)
		// A live process of the host (this test), recorded as the other
		// members write: no namespace. Its container is real.
		o := r.start("owner on the host", harness.Plan{Containers: 1}).ready()
		node := fmt.Appendf(nil, `{"pid":%d,"startedIso":%q,"backend":"docker"}`, o.Pid(), ledger.FormatISO(pidStart(t, o.Pid())))
		if err := os.WriteFile(harness.RunsDir(r.cache)+"/"+o.run+ledger.RecordExt, node, 0o600); err != nil {
			t.Fatal(err)
		}
		// The sweeper is its namespace's init: the namespace ends with it.
		direct := func(s *proctest.Spec) {
			s.Argv = append([]string{unshare, "--pid", "--fork", "--mount-proc"}, s.Argv...)
		}
		s := r.startWith("sweeper in a child namespace", harness.Plan{Then: harness.Sweep}, direct)
		if _, err := s.Get("done", readyWithin); err != nil {
			t.Fatal(err)
		}
		d, why := decision2(s.get(harness.ReportKey("round0", o.run)))
		if d != "left alone" || !strings.Contains(why, "names no pid namespace") {
			t.Errorf("the sweep from a child namespace decided %q (%s), want left alone: the pid is the host's", d, why)
		} else {
			t.Logf("from a child namespace: %s: %s", d, why)
		}
		o.checkAlive("the host's owner, after a sweep from a child namespace")
		s.CloseStdin()
		o.finish()
	})
}

// pidStart is when pid started, as the ledger reads it.
func pidStart(t *testing.T, pid int) time.Time {
	t.Helper()
	id, ok, err := ledger.Lookup(pid)
	if err != nil || !ok {
		t.Fatalf("look up %d: %v %v", pid, ok, err)
	}
	return id.Start
}
