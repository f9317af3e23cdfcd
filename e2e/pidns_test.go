//go:build linux

package e2e_test

import (
	"context"
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
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/ledger"
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

// Row 10: an owner in another pid namespace (unshare --pid --fork
// --mount-proc, the real code writing its record from inside). A sweep
// from this namespace cannot judge its pid and leaves the run alone, with
// that reason, whether the owner lives or not; the owner's watchdog, in
// the namespace with it, still removes everything after a SIGKILL. When
// the whole namespace dies (its init killed, so the watchdog with it), the
// run stays in the ledger for good: no process outside the namespace can
// prove it dead, and the row checks that it is left alone rather than
// guessed about.
func TestRow10PidNamespace(t *testing.T) {
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
	// namespace and its pid as seen from here.
	start := func(r *rig, name string) (*owner, string, int) {
		o := r.startWith(name, harness.Plan{Containers: 2, Networks: 1}, inNS).ready()
		b, err := os.ReadFile(harness.RunsDir(r.cache) + "/" + o.run + ledger.RecordExt)
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
		return o, rec.PidNamespace, pid
	}
	sweepFromHere := func(r *rig, o *owner, when string) {
		t.Helper()
		s := r.start("sweeper here ("+when+")", harness.Plan{Containers: 1}).ready()
		d, why := s.sweepOf(o.run)
		if d != "left alone" || !strings.Contains(why, "pid namespace") {
			t.Errorf("%s: the sweep from here decided %q (%s), want left alone because of the pid namespace", when, d, why)
		} else {
			t.Logf("%s: %s: %s", when, d, why)
		}
		s.finish()
	}

	t.Run("owner killed", func(t *testing.T) {
		r := r.sub(t)
		o, _, pid := start(r, "owner in a pid namespace")
		sweepFromHere(r, o, "owner alive")
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
		o, ns, _ := start(r, "owner in a pid namespace")
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
		time.Sleep(500 * time.Millisecond)
		o.checkAlive("the torn-down namespace's run, which nothing is left to remove")
		sweepFromHere(r, o, "namespace gone")
		o.checkListed("after the sweep from here", false)
		// What the product leaves, by design, is removed by hand.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		removed, err := r.eng.RemoveRun(ctx, o.run)
		if err != nil {
			t.Fatal(err)
		}
		if err := ledger.RemoveRunFiles(harness.RunsDir(r.cache), o.run); err != nil {
			t.Fatal(err)
		}
		t.Logf("left alone for good, as designed; removed by the test: %q and the run's files", removed)
	})
}
