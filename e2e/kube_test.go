//go:build linux

package e2e_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/rightsize/rightsize-go/internal/kubetest"
)

// kubeLeaseFixture is the package row 23 runs with `go test`, from this
// directory.
const kubeLeaseFixture = "./testdata/kubeleasefixture"

// Row 23: a live run on the kubernetes backend whose Lease is deleted
// under it (a sweep after the machine stalled past the lease, or a
// person). A user's test binary (the fixture: the backend linked for its
// effect, sandboxtest.Main) holds a running pod; the row deletes the
// run's Lease, and the cluster deletes that pod. The run recovers: its
// next Start gets a pod owned by a new Lease, which the garbage collector
// leaves; the loss is said once; the test fails at the stop of the pod the
// cluster deleted under it, never silently; and the run's end leaves
// nothing of it on the cluster.
func TestRow23KubeLeaseDeleted(t *testing.T) {
	img := kubetest.Busybox(t) // skips without the test cluster's node
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-e2e-lease-")
	goBin := goTool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	dir := t.TempDir()
	cmd := exec.Command(goBin, "test", "-count=1", "-v", kubeLeaseFixture)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+os.Getenv(kubetest.EnvKubeconfig),
		"RIGHTSIZE_BACKEND=kubernetes",
		"RIGHTSIZE_KUBE_NAMESPACE="+ns,
		"RIGHTSIZE_CACHE_DIR="+t.TempDir(),
		"RZ_FIXTURE_IMAGE="+img,
		"RZ_FIXTURE_INFO="+dir,
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ended := false
	defer func() {
		if !ended {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Logf("the fixture's output:\n%s", out.String())
		}
	}()
	step := func(name string) string {
		t.Helper()
		for {
			if v, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
				return string(v)
			}
			select {
			case err := <-exited:
				ended = true
				t.Fatalf("the fixture ended (%v) before its %s:\n%s", err, name, out.String())
			case <-ctx.Done():
				t.Fatalf("no %s from the fixture", name)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	tell := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	first := step("first")
	run := strings.Split(first, "-")[1]
	lease := "rz-run-" + run
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the run's Lease: %v", err)
	}
	bg := metav1.DeletePropagationBackground
	if err := cs.CoordinationV1().Leases(ns).Delete(ctx, lease, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatalf("delete the live run's Lease: %v", err)
	}
	tell("lease-deleted")

	second := step("second")
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
	p, err := cs.CoreV1().Pods(ns).Get(ctx, second, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("the pod the test was given after the loss: %v", err)
	case p.DeletionTimestamp != nil:
		t.Errorf("the pod the test was given after the loss is being deleted")
	case len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != l2.UID:
		t.Errorf("pod %s is owned by %v, want the new Lease %s", second, p.OwnerReferences, l2.UID)
	}
	tell("checked")

	select {
	case err = <-exited:
		ended = true
	case <-ctx.Done():
		t.Fatalf("the fixture did not end")
	}
	text := out.String()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(text, "--- FAIL: TestHeldThroughALostLease") {
		t.Errorf("go test of the fixture: %v (exit %d), want its test failed", err, code)
	}
	said := strings.Count(text, "rightsize: kubernetes: run "+run+"'s Lease")
	failed := strings.Contains(text, "stop "+first+": ") && strings.Contains(text, "was deleted while the run lived")
	if said != 1 || !failed || strings.Contains(text, "stop "+second+": ") {
		t.Errorf("the loss said %d times, the stop of %s failed saying so: %v, and nothing of %s's stop: want once, yes, nothing:\n%s", said, first, failed, second, text)
	}
	// The run's end leaves nothing of it.
	if err := kubetest.WaitGone(ctx, cs.CoordinationV1().Leases(ns).Get, lease); err != nil {
		t.Errorf("the run's Lease after its end: %v", err)
	}
	if err := kubetest.WaitGone(ctx, cs.CoreV1().Pods(ns).Get, second); err != nil {
		t.Errorf("the run's second pod after its end: %v", err)
	}
	t.Logf("the fixture's output:\n%s", text)
}

// ownedBy creates a pod named name owned by l, of an image no node pulls.
func ownedBy(ctx context.Context, t *testing.T, cs k8s.Interface, ns, name string, l *coordinationv1.Lease) string {
	t.Helper()
	no := false
	_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease", Name: l.Name, UID: l.UID,
		}}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "c", Image: "rightsize.invalid/never-pulled:1"}}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return name
}
