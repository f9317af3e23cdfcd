//go:build linux

package kubernetes_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/usermod"
)

// The crash matrix's row of a live run whose Lease is deleted under it (a
// sweep that found it lapsed while the machine stalled, or a person), on
// the user's path: a test binary of a module of its own (internal/usermod)
// holds a running pod; the row deletes the run's Lease, and the cluster
// deletes that pod. The run recovers: the test's next Start gets a pod
// owned by a new Lease, which the garbage collector leaves; the loss is
// said once; the test fails at the stop of the pod the cluster deleted
// under it, never silently; and once it has ended nothing of the run is
// left on the cluster.
func TestUserModuleLeaseDeleted(t *testing.T) {
	img := kubetest.Busybox(t)
	cs := kubetest.Client(t)
	bin := usermod.Build(t, usermod.Pods)
	ns := kubetest.Namespace(t, cs, "rz-usermod-lost-")
	info := filepath.Join(t.TempDir(), "info")
	p, err := proctest.Start(proctest.Spec{
		Name: "user's test holding a pod across its Lease's deletion",
		Argv: []string{bin, "-test.run=^TestHoldsAcross$", "-test.count=1", "-test.v"},
		Env:  userPodsEnv(ns, t.TempDir(), img, info),
		Dir:  filepath.Dir(bin),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.EnsureDead() })
	done := make(chan struct{})
	go func() { p.Wait(10 * time.Minute); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var in usermod.Info
	for len(in.Sandboxes) == 0 {
		if in, err = usermod.ReadInfo(info); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			t.Fatalf("the user's test ended before its first pod:\n%s", p.Output())
		case <-ctx.Done():
			t.Fatalf("no first pod from the user's test:\n%s", p.Output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	first := in.Sandboxes[0]
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := pod.Labels[backend.LabelRunID]
	lease := "rz-run-" + run
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the run's Lease: %v", err)
	}
	bg := metav1.DeletePropagationBackground
	if err := cs.CoordinationV1().Leases(ns).Delete(ctx, lease, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatalf("delete the live run's Lease: %v", err)
	}
	if err := p.Send("go on"); err != nil {
		t.Fatal(err)
	}

	if in, err = usermod.WaitBlocked(info, done, 3*time.Minute); err != nil || len(in.Sandboxes) != 2 {
		t.Fatalf("the user's test after the Lease's deletion: %v (it said %+v)\n%s", err, in, p.Output())
	}
	second := in.Sandboxes[1]
	l2, err := cs.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Fatalf("the run's Lease after its next Start: %v, want a new one", err)
	case l2.UID == l.UID:
		t.Fatalf("the run's Lease is still %s, which was deleted", l.UID)
	}
	if err := kubetest.WaitGone(ctx, cs.CoreV1().Pods(ns).Get, first); err != nil {
		t.Errorf("the pod the deleted Lease owned: %v", err)
	}
	// A pod made now with the old owner, which the collector deletes only
	// after it has seen the second pod.
	canary := ownedBy(ctx, t, cs, ns, "canary-"+run, l)
	if err := kubetest.WaitGone(ctx, cs.CoreV1().Pods(ns).Get, canary); err != nil {
		t.Errorf("a pod of the deleted Lease: %v", err)
	}
	pod, err = cs.CoreV1().Pods(ns).Get(ctx, second, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("the pod the test was given after the loss: %v", err)
	case pod.DeletionTimestamp != nil:
		t.Errorf("the pod the test was given after the loss is being deleted")
	case len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != l2.UID:
		t.Errorf("pod %s is owned by %v, want the new Lease %s", second, pod.OwnerReferences, l2.UID)
	}

	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if !p.Wait(2 * time.Minute) {
		t.Fatalf("the user's test did not end:\n%s", p.Output())
	}
	out := p.Output()
	if exited, err := p.Exited(); !exited || err == nil || !strings.Contains(out, "--- FAIL: TestHoldsAcross") {
		t.Errorf("the user's test ended %s, want it failed", p.Status())
	}
	said := strings.Count(out, "rightsize: kubernetes: run "+run+"'s Lease")
	failed := strings.Contains(out, "stop "+first+": ") && strings.Contains(out, "was deleted while the run lived")
	if said != 1 || !failed || strings.Contains(out, "stop "+second+": ") {
		t.Errorf("the loss said %d times; the stop of %s failed saying so: %v; the stop of %s said nothing: %v; want once, yes, yes",
			said, first, failed, second, !strings.Contains(out, "stop "+second+": "))
	}
	// Its end leaves nothing of the run.
	if err := kubetest.WaitGone(ctx, cs.CoordinationV1().Leases(ns).Get, lease); err != nil {
		t.Errorf("the run's Lease after its end: %v", err)
	}
	waitPodsGone(t, ctx, cs, ns, run)
	t.Logf("the user's test said:\n%s", out)
}

// ownedBy creates a pod named name owned by l, of an image no node pulls.
func ownedBy(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, l *coordinationv1.Lease) string {
	t.Helper()
	no := false
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease", Name: l.Name, UID: l.UID,
		}}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "c", Image: "rightsize.invalid/never-pulled:1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return name
}
