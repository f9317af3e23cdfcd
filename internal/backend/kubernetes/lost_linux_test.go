package kubernetes_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// warnings keeps what a driver says of what no call returned.
type warnings struct {
	mu   sync.Mutex
	said []string
}

func (w *warnings) add(msg string) {
	w.mu.Lock()
	w.said = append(w.said, msg)
	w.mu.Unlock()
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.said...)
}

// deleteLease deletes l as a person, or a sweep that found it lapsed,
// does: what it owns goes with it.
func deleteLease(ctx context.Context, t testing.TB, cs k8s.Interface, l *coordinationv1.Lease) {
	t.Helper()
	bg := metav1.DeletePropagationBackground
	if err := cs.CoordinationV1().Leases(l.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatalf("delete Lease %s/%s: %v", l.Namespace, l.Name, err)
	}
}

// ownerUID is the uid of the one owner of p.
func ownerUID(p *corev1.Pod) string {
	if len(p.OwnerReferences) != 1 {
		return ""
	}
	return string(p.OwnerReferences[0].UID)
}

// The Lease of a live run is deleted under it (a sweep that found it
// lapsed while this machine stalled, or a person): the cluster deletes the
// pod it owned, and the run recovers: its next create makes a new Lease
// and is owned by it, the garbage collector leaves that pod, the loss is
// said once, and the stop of the pod the cluster deleted under the test
// fails saying so.
func TestNodeARunWhoseLeaseIsDeletedRecovers(t *testing.T) {
	t.Parallel()
	img := kubetest.Busybox(t)
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-lost-")
	d := open(t, ns, 3)
	var w warnings
	d.SetWarn(w.add)
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	const run = "0105e001"
	defer d.CloseRun(context.Background(), run)
	spec := backend.Spec{Image: img, Cmd: []string{"/server"}, RunID: run}

	a, err := d.Create(ctx, "rz-"+run+"-1", spec)
	if err != nil {
		t.Fatalf("create the first pod: %v", err)
	}
	first := leaseOf(ctx, t, cs, ns, run)
	if first == nil {
		t.Fatal("the run has no Lease")
	}
	deleteLease(ctx, t, cs, first)

	b, err := d.Create(ctx, "rz-"+run+"-2", spec)
	if err != nil {
		t.Fatalf("a create after the run's Lease was deleted: %v, want the run to recover", err)
	}
	second := leaseOf(ctx, t, cs, ns, run)
	switch {
	case second == nil:
		t.Fatal("after the create, the run has no Lease")
	case second.UID == first.UID:
		t.Fatalf("the run's Lease is still %s, which was deleted", first.UID)
	}
	// The collector deletes what the deleted Lease owned; then a pod
	// made now with that owner, which it takes only after it has seen
	// the second pod.
	waitDeleted(ctx, t, cs, ns, a.Name(), time.Now())
	canary := createPod(ctx, t, cs, ns, "canary-"+run, first)
	waitDeleted(ctx, t, cs, ns, canary.Name, time.Now())
	pb := livePod(ctx, t, cs, ns, b.Name())
	switch {
	case pb == nil:
		t.Fatalf("the garbage collector deleted pod %s, made after the run's Lease was deleted", b.Name())
	case ownerUID(pb) != string(second.UID):
		t.Errorf("pod %s is owned by %v, want the new Lease %s", b.Name(), pb.OwnerReferences, second.UID)
	}
	// This process renews the new Lease.
	proctest.WaitUntil(t, 30*time.Second, "a renewal of the new Lease", func() bool {
		l := leaseOf(ctx, t, cs, ns, run)
		return l != nil && l.UID == second.UID && l.Spec.RenewTime.After(second.Spec.RenewTime.Time)
	})

	said := w.all()
	if len(said) != 1 || !strings.Contains(said[0], string(first.UID)) || !strings.Contains(said[0], "was deleted while the run lived") {
		t.Errorf("said %q, want the loss of Lease %s said once", said, first.UID)
	}
	if err := a.Stop(ctx, time.Second); !errors.Is(err, backend.ErrClaimLost) {
		t.Errorf("stop of the pod the cluster deleted: %v, want ErrClaimLost", err)
	} else {
		t.Logf("%v", err)
	}
	if err := b.Stop(ctx, time.Second); err != nil {
		t.Errorf("stop of the pod of the new Lease: %v", err)
	}
}

// The Lease is deleted between a Start's creates and its return: the
// start fails saying so (the pod is the garbage collector's), and the run's
// next start makes a new Lease that owns its pod.
func TestNoNodeALeaseDeletedAsAPodIsMadeFailsThatStart(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-lostmid-")
	d := open(t, ns, kubernetes.DefaultLeaseSeconds)
	var w warnings
	d.SetWarn(w.add)
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	const run = "0105e002"
	defer d.CloseRun(context.Background(), run)
	spec := backend.Spec{Image: never, RunID: run}

	if _, err := d.Start(ctx, "rz-"+run+"-1", spec); err != nil {
		t.Fatal(err)
	}
	first := leaseOf(ctx, t, cs, ns, run)
	d.SetAfterCreate(func(name string) {
		if name == "rz-"+run+"-2" {
			deleteLease(ctx, t, cs, first)
		}
	})
	_, err := d.Start(ctx, "rz-"+run+"-2", spec)
	if !errors.Is(err, backend.ErrClaimLost) || !strings.Contains(err.Error(), "rz-"+run+"-2") {
		t.Fatalf("a start whose Lease was deleted as its pod was made: %v, want ErrClaimLost naming the pod", err)
	}
	t.Logf("%v", err)
	d.SetAfterCreate(nil)
	sb, err := d.Start(ctx, "rz-"+run+"-3", spec)
	if err != nil {
		t.Fatalf("the next start: %v, want the run to recover", err)
	}
	second := leaseOf(ctx, t, cs, ns, run)
	if second == nil || second.UID == first.UID {
		t.Fatalf("the run's Lease after the next start: %v, want a new one", second)
	}
	canary := createPod(ctx, t, cs, ns, "canary-"+run, first)
	waitDeleted(ctx, t, cs, ns, canary.Name, time.Now())
	if p := livePod(ctx, t, cs, ns, sb.Name()); p == nil || ownerUID(p) != string(second.UID) {
		t.Errorf("the next start's pod: %v, want it live and owned by the new Lease %s", p, second.UID)
	}
	if said := w.all(); len(said) != 1 {
		t.Errorf("said %q, want the loss said once", said)
	}
}
