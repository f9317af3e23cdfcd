package kubetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"

	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// These tests run against the test cluster of scripts/kube.sh, which has no
// node: the pods are stored and garbage-collected, never scheduled or run.
// The names say so ("NoNode"), so that no one takes them for tests of
// running pods.

// gcWithin bounds a test's waits for the garbage collector. It takes about
// 100 ms once its informers have synced; right after the cluster starts
// the first sync can take seconds.
const gcWithin = 2 * time.Minute

// TestNoNodeGarbageCollectorDeletesPodsOfADeletedLease proves the
// machinery the kubernetes backend stands on: pods whose ownerReferences
// name a run's Lease stay while the Lease lives, and the cluster's own
// garbage collector deletes them once the Lease is deleted.
func TestNoNodeGarbageCollectorDeletesPodsOfADeletedLease(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-gc-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()

	lease := createLease(ctx, t, cs, ns, "run")
	var pods []string
	for i := range 3 {
		pods = append(pods, createPod(ctx, t, cs, ns, fmt.Sprintf("sandbox-%d", i), leaseOwner(lease)).Name)
	}
	// A pod that names the Lease with a UID that is not its own has an
	// absent owner: the garbage collector deletes it while the Lease
	// lives. Once it is gone the collector has seen the pods made before
	// it, so the three still being there is its decision, not its delay.
	wrongUID := leaseOwner(lease)
	wrongUID.UID = uuid.NewUUID()
	witness := createPod(ctx, t, cs, ns, "owner-uid-wrong", wrongUID)
	if err := kubetest.WaitGone(ctx, cs.CoreV1().Pods(ns).Get, witness.Name); err != nil {
		t.Fatalf("the pod whose owner's UID (%s) is not the Lease's (%s) was not collected: %v", wrongUID.UID, lease.UID, err)
	}
	for _, name := range pods {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s, owned by the live Lease: %v", name, err)
		}
		if p.DeletionTimestamp != nil {
			t.Fatalf("pod %s, owned by the live Lease, is being deleted (since %v)", name, p.DeletionTimestamp)
		}
	}

	deleted := time.Now()
	if err := cs.CoordinationV1().Leases(ns).Delete(ctx, lease.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the Lease: %v", err)
	}
	for _, name := range pods {
		if err := kubetest.WaitGone(ctx, cs.CoreV1().Pods(ns).Get, name); err != nil {
			t.Fatalf("pod %s of the deleted Lease: %v", name, err)
		}
	}
	t.Logf("the garbage collector deleted the Lease's %d pods %v after the Lease", len(pods), time.Since(deleted).Round(time.Millisecond))
}

// TestNoNodeOwnerInAnotherNamespaceIsAbsent shows what the backend must
// never write: an ownerReference to a Lease of another namespace. Owner
// references do not cross namespaces, so the garbage collector takes the
// owner for absent, deletes the pod though the Lease lives, and records an
// OwnerRefInvalidNamespace event on it (Kubernetes' "Owners and
// Dependents").
func TestNoNodeOwnerInAnotherNamespaceIsAbsent(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	leaseNS := kubetest.Namespace(t, cs, "rz-owner-")
	podNS := kubetest.Namespace(t, cs, "rz-dependent-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()

	lease := createLease(ctx, t, cs, leaseNS, "run")
	pod := createPod(ctx, t, cs, podNS, "owner-elsewhere", leaseOwner(lease))
	if err := kubetest.WaitGone(ctx, cs.CoreV1().Pods(podNS).Get, pod.Name); err != nil {
		t.Fatalf("the pod owned by a Lease of namespace %s was not collected: %v", leaseNS, err)
	}
	if _, err := cs.CoordinationV1().Leases(leaseNS).Get(ctx, lease.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Lease, which nothing deleted: %v", err)
	}
	selector := fields.Set{"involvedObject.uid": string(pod.UID), "reason": "OwnerRefInvalidNamespace"}.String()
	var events int
	var err error
	if !proctest.Poll(10*time.Second, func() bool {
		var list *corev1.EventList
		list, err = cs.CoreV1().Events(podNS).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err == nil {
			events = len(list.Items)
		}
		return events > 0
	}) {
		t.Fatalf("no event %s in %s (err: %v)", selector, podNS, err)
	}
}

func createLease(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) *coordinationv1.Lease {
	t.Helper()
	holder, seconds, now := "rightsize-test", int32(15), metav1.NewMicroTime(time.Now())
	lease, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: &seconds,
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Lease %s/%s: %v", ns, name, err)
	}
	return lease
}

func leaseOwner(l *coordinationv1.Lease) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: coordinationv1.SchemeGroupVersion.String(),
		Kind:       "Lease",
		Name:       l.Name,
		UID:        l.UID,
	}
}

// createPod creates a pod that no node will run (there is none): the image
// is never pulled.
func createPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, owner metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	no := false
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{
				Name:    "sandbox",
				Image:   "rightsize.invalid/never-pulled:1",
				Command: []string{"sleep", "3600"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return pod
}
