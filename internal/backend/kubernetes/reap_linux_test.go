package kubernetes_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// TestNoNodeSIGKILLOfTheOwnerDeletesItsRun: a test process SIGKILLed with
// two pods and their alias Services; its watchdog deletes the run's Lease,
// and the pods are deleted, the Services and the Lease gone, the ledger
// files deleted.
func TestNoNodeSIGKILLOfTheOwnerDeletesItsRun(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-kill-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	o := startOwner(t, ns, kubernetes.DefaultLeaseSeconds)

	lease := leaseOf(ctx, t, cs, ns, o.run)
	if lease == nil {
		t.Fatalf("run %s has no Lease %s", o.run, kubernetes.LeaseName(o.run))
	}
	sel := metav1.ListOptions{LabelSelector: labels.Set{backend.LabelRunID: o.run}.String()}
	svcs, err := cs.CoreV1().Services(ns).List(ctx, sel)
	if err != nil || len(svcs.Items) != ownerPods {
		t.Fatalf("the run's alias Services: %d (%v), want %d", len(svcs.Items), err, ownerPods)
	}
	for _, name := range o.pods {
		p := livePod(ctx, t, cs, ns, name)
		if p == nil || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != lease.UID {
			t.Fatalf("pod %s: want one ownerReference to Lease %s (%s), got %+v", name, lease.Name, lease.UID, p)
		}
	}

	o.KillAndWait()
	killed := o.KilledAt()
	var slowest time.Duration
	for _, name := range o.pods {
		slowest = max(slowest, waitDeleted(ctx, t, cs, ns, name, killed))
	}
	t.Logf("SIGKILL → every pod of the run deleted (deletionTimestamp or gone): %v", slowest.Round(time.Millisecond))
	proctest.WaitUntil(t, time.Minute, "the run's Lease gone", func() bool { return leaseOf(ctx, t, cs, ns, o.run) == nil })
	proctest.WaitUntil(t, time.Minute, "the run's Services gone", func() bool {
		l, err := cs.CoreV1().Services(ns).List(ctx, sel)
		return err == nil && len(l.Items) == 0
	})
	proctest.WaitUntil(t, time.Minute, "the watchdog ended", func() bool { return gone(o.watchdog) })
	if !runFilesGone(o.cache, o.run) {
		t.Errorf("the run's ledger files are still in %s", o.cache)
	}
}

// TestNoNodeGoTestTimeoutDeletesItsRun: `go test -timeout` ends the owner
// with a panic, not a signal; the watchdog reaps the same way.
func TestNoNodeGoTestTimeoutDeletesItsRun(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-timeout-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	o := startOwner(t, ns, kubernetes.DefaultLeaseSeconds, "-test.timeout=5s")
	if !o.Wait(time.Minute) {
		t.Fatalf("the owner did not end at its -test.timeout")
	}
	for _, name := range o.pods {
		waitDeleted(ctx, t, cs, ns, name, time.Now())
	}
	proctest.WaitUntil(t, time.Minute, "the run's Lease gone", func() bool { return leaseOf(ctx, t, cs, ns, o.run) == nil })
	proctest.WaitUntil(t, time.Minute, "the watchdog ended", func() bool { return gone(o.watchdog) })
}

// TestNoNodeWatchdogKilledTooSweptFromAnotherCacheAfterTheLeaseLapses: the
// owner and its watchdog SIGKILLed (the machine gone): nothing deletes the
// pods; a sweep from another cache dir (another machine: the run is in no
// ledger it reads) leaves the Lease while it has not lapsed, and deletes
// it once it has; the garbage collector deletes the pods.
func TestNoNodeWatchdogKilledTooSweptFromAnotherCacheAfterTheLeaseLapses(t *testing.T) {
	const leaseSeconds = 3
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-lapse-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	o := startOwner(t, ns, leaseSeconds)
	if err := syscall.Kill(o.watchdog, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the watchdog %d: %v", o.watchdog, err)
	}
	proctest.WaitUntil(t, time.Minute, "the watchdog ended", func() bool { return gone(o.watchdog) })
	o.KillAndWait()

	elsewhere := open(t, ns, leaseSeconds)
	otherCache := t.TempDir()
	// Before the Lease lapses, the sweep must leave it: asked while more
	// than a second of it is left, so that the answer is not a race.
	if l := leaseOf(ctx, t, cs, ns, o.run); l != nil && time.Until(l.Spec.RenewTime.Add(leaseSeconds*time.Second)) > time.Second {
		rep, err := reaper.Sweep(ctx, elsewhere, reaper.WithCacheDir(otherCache))
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		if len(rep.Lapsed) > 0 || leaseOf(ctx, t, cs, ns, o.run) == nil {
			t.Fatalf("a sweep dropped the Lease of run %s before it lapsed: %v", o.run, rep.Lapsed)
		}
	} else {
		t.Logf("the Lease was within a second of lapsing: its early sweep is not asked")
	}
	for _, name := range o.pods {
		if livePod(ctx, t, cs, ns, name) == nil {
			t.Fatalf("pod %s deleted with nobody to delete it", name)
		}
	}

	var rep *reaper.Report
	took := proctest.WaitUntil(t, time.Minute, "a sweep from another cache dir drops the lapsed Lease", func() bool {
		var err error
		rep, err = reaper.Sweep(ctx, elsewhere, reaper.WithCacheDir(otherCache))
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		if slices.Contains(rep.Lapsed, o.run) {
			return true
		}
		time.Sleep(100 * time.Millisecond) // a sweep lists every Lease: not 200 a second
		return false
	})
	t.Logf("the sweep dropped the Lease %v after the owner's death", took.Round(time.Millisecond))
	for _, name := range o.pods {
		waitDeleted(ctx, t, cs, ns, name, time.Now())
	}
	if rep.LapseProblem != "" {
		t.Errorf("the sweep's problem with lapsed Leases: %s", rep.LapseProblem)
	}
}

// TestNoNodeWatchdogKilledTooSweptFromItsLedger: the owner and its
// watchdog SIGKILLed, the next sweep of the same ledger (the same machine)
// proves the owner dead and reaps the run: it drops the run's Lease at
// once, as the watchdog would have, not a lapse later. (Found by the chaos
// harness: the Lease stayed after the sweep until it lapsed.)
func TestNoNodeWatchdogKilledTooSweptFromItsLedger(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-ledger-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	// A Lease that cannot lapse while the test runs.
	const leaseSeconds = 600
	o := startOwner(t, ns, leaseSeconds)
	if err := syscall.Kill(o.watchdog, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the watchdog %d: %v", o.watchdog, err)
	}
	proctest.WaitUntil(t, time.Minute, "the watchdog ended", func() bool { return gone(o.watchdog) })
	o.KillAndWait()
	if leaseOf(ctx, t, cs, ns, o.run) == nil {
		t.Fatalf("run %s's Lease went with nobody to delete it", o.run)
	}
	rep, err := reaper.Sweep(ctx, open(t, ns, leaseSeconds), reaper.WithCacheDir(o.cache))
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	rr, ok := rep.Run(o.run)
	if !ok || rr.Decision != reaper.Reaped {
		t.Fatalf("the sweep of its ledger: run %s %s (%s), want reaped", o.run, rr.Decision, rr.Reason)
	}
	if leaseOf(ctx, t, cs, ns, o.run) != nil {
		t.Errorf("run %s's Lease is still there after the sweep that reaped the run: it would stay until it lapsed, %ds later", o.run, leaseSeconds)
	}
	for _, name := range o.pods {
		waitDeleted(ctx, t, cs, ns, name, time.Now())
	}
}

// TestNoNodeSweepLeavesALeaseItsOwnerDoesNotHold: a sweep that judged a
// run's recorded owner dead drops the run's Lease only when that process
// of this machine holds it. Here the Lease says another machine's process
// holds it (a cache dir two machines share): the sweep reaps what the
// ledger lists, says why the Lease stays, and leaves it to lapse.
func TestNoNodeSweepLeavesALeaseItsOwnerDoesNotHold(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-holder-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	const leaseSeconds = 600
	o := startOwner(t, ns, leaseSeconds)
	if err := syscall.Kill(o.watchdog, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the watchdog %d: %v", o.watchdog, err)
	}
	proctest.WaitUntil(t, time.Minute, "the watchdog ended", func() bool { return gone(o.watchdog) })
	l := leaseOf(ctx, t, cs, ns, o.run)
	if l == nil || l.Spec.HolderIdentity == nil {
		t.Fatalf("run %s's Lease, with its holder: %+v", o.run, l)
	}
	mine := *l.Spec.HolderIdentity
	_, pid, _ := strings.Cut(mine, "/")
	other := "another-machine/" + pid
	patch := []byte(`{"spec":{"holderIdentity":"` + other + `"}}`)
	if _, err := cs.CoordinationV1().Leases(ns).Patch(ctx, l.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("say another machine holds the Lease: %v", err)
	}
	o.KillAndWait()
	rep, err := reaper.Sweep(ctx, open(t, ns, leaseSeconds), reaper.WithCacheDir(o.cache))
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	rr, ok := rep.Run(o.run)
	if !ok || rr.Decision != reaper.Reaped {
		t.Fatalf("the sweep of its ledger: run %s %s (%s), want reaped", o.run, rr.Decision, rr.Reason)
	}
	if !strings.Contains(rr.Reason, other) || !strings.Contains(rr.Reason, "it lapses") {
		t.Errorf("the sweep's reason %q does not say the Lease is held by %s and left to lapse", rr.Reason, other)
	}
	if after := leaseOf(ctx, t, cs, ns, o.run); after == nil || after.UID != l.UID {
		t.Errorf("run %s's Lease, held by %s, was deleted by a sweep that judged %s dead (before: %s, after: %+v)", o.run, other, mine, l.UID, after)
	}
}

// TestNoNodeLiveRunUntouchedByAnotherRunsSweep: a live run's Lease is
// renewed; sweeps from another cache dir, through three of its durations,
// leave it and its pods alone.
func TestNoNodeLiveRunUntouchedByAnotherRunsSweep(t *testing.T) {
	const leaseSeconds = 3
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-live-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	o := startOwner(t, ns, leaseSeconds)
	elsewhere := open(t, ns, leaseSeconds)
	otherCache := t.TempDir()

	first := leaseOf(ctx, t, cs, ns, o.run)
	if first == nil {
		t.Fatalf("run %s has no Lease", o.run)
	}
	until := first.Spec.RenewTime.Add(3 * leaseSeconds * time.Second)
	sweeps := 0
	for time.Now().Before(until) {
		rep, err := reaper.Sweep(ctx, elsewhere, reaper.WithCacheDir(otherCache))
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		sweeps++
		if len(rep.Lapsed) > 0 {
			t.Fatalf("sweep %d dropped %v, of a live run", sweeps, rep.Lapsed)
		}
		for _, name := range o.pods {
			if livePod(ctx, t, cs, ns, name) == nil {
				t.Fatalf("sweep %d: pod %s of the live run %s is deleted", sweeps, name, o.run)
			}
		}
		time.Sleep(200 * time.Millisecond) // the sweeps' pace, not a synchronisation
	}
	last := leaseOf(ctx, t, cs, ns, o.run)
	if last == nil || !last.Spec.RenewTime.After(first.Spec.RenewTime.Time) {
		t.Fatalf("the live run's Lease was not renewed in %d lease durations: %+v", 3, last)
	}
	t.Logf("%d sweeps left the live run alone", sweeps)
	o.KillAndWait()
	proctest.WaitUntil(t, time.Minute, "the watchdog ended", func() bool { return gone(o.watchdog) })
}

// TestNoNodeForeignLeasesLeftAlone: lapsed Leases that are not provably a
// run's (no labels, a name that is not the run's, a label that disagrees,
// a run id outside the grammar) are left, with the pods they own; the
// lapsed Lease of a run beside them is dropped, so the sweep did run.
func TestNoNodeForeignLeasesLeftAlone(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-foreign-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	d := open(t, ns, kubernetes.DefaultLeaseSeconds)
	run := func(id string) map[string]string {
		return map[string]string{backend.LabelRunID: id, backend.LabelRunIDAlt: id}
	}
	stale := time.Now().Add(-time.Hour)
	leases := []struct {
		name   string
		labels map[string]string
		ours   bool
	}{
		{"rz-run-0badc0de", nil, false},
		{"rz-run-0badc0df", map[string]string{backend.LabelRunID: "0badc0df"}, false},
		{"someone-elses", run("0badc0e0"), false},
		{"rz-run-0badc0e1", map[string]string{backend.LabelRunID: "0badc0e1", backend.LabelRunIDAlt: "0badc0e2"}, false},
		{"rz-run-0badc0e3", run("0badc0e3"), true},
	}
	var pods []string
	for _, l := range leases {
		lease := createLease(ctx, t, cs, ns, l.name, l.labels, stale)
		pods = append(pods, createPod(ctx, t, cs, ns, "pod-of-"+l.name, lease).Name)
	}
	rep, err := reaper.Sweep(ctx, d, reaper.WithCacheDir(t.TempDir()))
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if want := []string{"0badc0e3"}; !slices.Equal(rep.Lapsed, want) || rep.LapseProblem != "" {
		t.Fatalf("lapsed runs dropped: %v (%s), want %v", rep.Lapsed, rep.LapseProblem, want)
	}
	for i, l := range leases {
		if l.ours {
			waitDeleted(ctx, t, cs, ns, pods[i], time.Now())
			continue
		}
		if _, err := cs.CoordinationV1().Leases(ns).Get(ctx, l.name, metav1.GetOptions{}); err != nil {
			t.Errorf("foreign Lease %s: %v", l.name, err)
		}
	}
	// Ledger lines no pod can be named by: nothing of them exists, and a
	// pod's name inside them is not reached.
	hostile := []string{"../" + pods[0], pods[0] + "/log", "A;" + pods[0], ".."}
	for i, err := range d.Remove(ctx, backend.SandboxKind, "0badc0de", hostile) {
		if !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("remove %q: %v, want not found", hostile[i], err)
		}
	}
	for i, err := range d.RemoveIDs(ctx, backend.SandboxKind, hostile) {
		if !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("remove id %q: %v, want not found", hostile[i], err)
		}
	}
	// The dropped Lease's pod is gone: the collector has seen the others,
	// which it left.
	for i, l := range leases {
		if !l.ours && livePod(ctx, t, cs, ns, pods[i]) == nil {
			t.Errorf("pod %s of the foreign Lease %s is deleted", pods[i], l.name)
		}
	}
}

// TestNoNodeCreateSaysNoNodeRanThePod: the pod is created, and Create's wait
// fails naming that no node ran it.
func TestNoNodeCreateSaysNoNodeRanThePod(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-nonode-")
	d := open(t, ns, kubernetes.DefaultLeaseSeconds, kubernetes.EnvStartTimeout+"=1")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	const run = "0c0ffee1"
	defer d.CloseRun(ctx, run)
	_, err := d.Create(ctx, "rz-0c0ffee1-1", backend.Spec{Image: never, RunID: run})
	if !errors.Is(err, kubernetes.ErrNoNode) {
		t.Fatalf("Create on a cluster with no node: %v, want ErrNoNode", err)
	}
	t.Logf("%v", err)
	if livePod(ctx, t, cs, ns, "rz-0c0ffee1-1") == nil {
		t.Fatalf("the pod was not created")
	}
}

// gone: no process pid (or a zombie nobody reaped yet is all that is left).
func gone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}
