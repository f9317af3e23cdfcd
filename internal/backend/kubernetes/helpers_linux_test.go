package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// These tests run against the test cluster of scripts/kube.sh, which has no
// node: pods are stored and garbage-collected, never scheduled or run. The
// names say so ("NoNode").

// gcWithin bounds a test's waits for the garbage collector, which right
// after the cluster starts can take seconds to sync its informers.
const gcWithin = 2 * time.Minute

// never is an image no node pulls here: there is no node.
const never = "rightsize.invalid/never-pulled:1"

// envOwner makes this test binary the owner helper (TestOwnerHelper).
const envOwner = "RZ_KUBE_TEST_OWNER"

// envOwnerImage, with a node, is the image the owner helper's pods run
// (its server), each waited for until it runs.
const envOwnerImage = "RZ_KUBE_TEST_OWNER_IMAGE"

// ownerPods is how many pods the owner helper starts.
const ownerPods = 2

// env points this process's backend at the test cluster and namespace ns,
// with a Lease of leaseSeconds.
func env(t testing.TB, ns string, leaseSeconds int) []string {
	t.Helper()
	kubetest.Config(t) // skips without the cluster
	return []string{
		"KUBECONFIG=" + os.Getenv(kubetest.EnvKubeconfig),
		kubernetes.EnvNamespace + "=" + ns,
		kubernetes.EnvLeaseSeconds + "=" + strconv.Itoa(leaseSeconds),
		backend.EnvBackend + "=" + backend.Kubernetes,
	}
}

// open opens the backend on namespace ns of the test cluster, in this
// process.
func open(t testing.TB, ns string, leaseSeconds int, extra ...string) *kubernetes.Driver {
	t.Helper()
	vars := map[string]string{}
	for _, kv := range append(env(t, ns, leaseSeconds), extra...) {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	d, err := kubernetes.OpenEnv(context.Background(), vars)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// owner is a started owner helper: a test process with a run of ownerPods
// pods on one network.
type owner struct {
	*proctest.Helper
	run, cache string
	pods       []string
	watchdog   int
}

// startOwner starts this test binary as an owner of a run in ns, with its
// own cache dir, and waits until its pods are created.
func startOwner(t testing.TB, ns string, leaseSeconds int, args ...string) *owner {
	t.Helper()
	return startOwnerWith(t, ns, leaseSeconds, nil, args...)
}

// startOwnerWith is startOwner with more of the owner's environment:
// envOwnerImage makes its pods run that image's server, and waits until
// they run.
func startOwnerWith(t testing.TB, ns string, leaseSeconds int, more []string, args ...string) *owner {
	t.Helper()
	cache := t.TempDir()
	set := append(env(t, ns, leaseSeconds), envOwner+"=1", ledger.EnvCacheDir+"="+cache, reaper.EnvReaper+"=")
	set = append(set, more...)
	h := proctest.StartHelper(t, proctest.Spec{
		Name:    "owner",
		Argv:    proctest.TestArgv("TestOwnerHelper", args...),
		Env:     proctest.Environ(nil, set...),
		Setpgid: true,
	})
	o := &owner{Helper: h, cache: cache}
	o.run = h.Expect("run")
	o.pods = strings.Split(h.Expect("pods"), ",")
	var err error
	if o.watchdog, err = strconv.Atoi(h.Expect("watchdog")); err != nil {
		t.Fatalf("watchdog pid: %v", err)
	}
	return o
}

// TestOwnerHelper is the owner process: it opens a session on the
// backend, starts ownerPods pods (each with an alias on one network), says
// what it made and blocks until it is killed.
func TestOwnerHelper(t *testing.T) {
	if os.Getenv(envOwner) != "1" {
		t.Skip("the owner helper of the SIGKILL tests")
	}
	ctx := context.Background()
	d, err := kubernetes.Open(ctx)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	s, err := reaper.Open(ctx, d)
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	net := "rz-net-" + s.RunID()
	note, err := s.Create(ctx, names.NetworkKind, net, func(ctx context.Context) (string, error) {
		return d.CreateNetwork(ctx, net, s.RunID())
	})
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	if note == nil || !note.Started {
		t.Fatalf("no watchdog: %+v", note)
	}
	var pods []string
	for i := range ownerPods {
		name := s.NextName()
		_, err := s.Create(ctx, names.SandboxKind, name, func(ctx context.Context) (string, error) {
			spec := backend.Spec{
				Image: never, Cmd: []string{"sleep", "3600"}, RunID: s.RunID(),
				Networks: map[string][]string{net: {"alias-" + strconv.Itoa(i) + "-" + s.RunID()}},
				Ports:    []string{"8080/tcp"},
			}
			if img := os.Getenv(envOwnerImage); img != "" {
				spec.Image, spec.Cmd = img, []string{"/server"}
				sb, err := d.Create(ctx, name, spec)
				if err != nil {
					return "", err
				}
				return sb.ID(), nil
			}
			sb, err := d.Start(ctx, name, spec)
			if err != nil {
				return "", err
			}
			return sb.ID(), nil
		})
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		pods = append(pods, name)
	}
	proctest.Say("run", s.RunID())
	proctest.Say("pods", strings.Join(pods, ","))
	proctest.Say("watchdog", strconv.Itoa(s.Watchdog().PID))
	proctest.Block()
}

// waitDeleted waits until pod is gone or has a deletionTimestamp, and
// returns how long that took from since.
func waitDeleted(ctx context.Context, t testing.TB, cs k8s.Interface, ns, pod string, since time.Time) time.Duration {
	t.Helper()
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil {
			return time.Since(since)
		}
		if ctx.Err() != nil {
			t.Fatalf("pod %s/%s: not deleted within the test's bound (last: %v)", ns, pod, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leaseOf returns the run's Lease, nil when there is none.
func leaseOf(ctx context.Context, t testing.TB, cs k8s.Interface, ns, run string) *coordinationv1.Lease {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, kubernetes.LeaseName(run), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get the Lease of run %s: %v", run, err)
	}
	return l
}

// pod returns pod name, nil when it is gone or being deleted.
func livePod(ctx context.Context, t testing.TB, cs k8s.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	if p.DeletionTimestamp != nil {
		return nil
	}
	return p
}

// runFilesGone: the run's ledger files in cache are gone.
func runFilesGone(cache, run string) bool {
	return !ledger.HasFiles(filepath.Join(cache, ledger.RunsDir), run)
}

// createLease creates a Lease renewed last at renewed, for 15 s.
func createLease(ctx context.Context, t testing.TB, cs k8s.Interface, ns, name string, lb map[string]string, renewed time.Time) *coordinationv1.Lease {
	t.Helper()
	holder, seconds, at := "rightsize-test", int32(15), metav1.NewMicroTime(renewed)
	l, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lb},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, AcquireTime: &at, RenewTime: &at},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Lease %s/%s: %v", ns, name, err)
	}
	return l
}

// createPod creates a pod owned by the Lease l.
func createPod(ctx context.Context, t testing.TB, cs k8s.Interface, ns, name string, l *coordinationv1.Lease) *corev1.Pod {
	t.Helper()
	no := false
	p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease", Name: l.Name, UID: l.UID,
		}}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "sandbox", Image: never}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return p
}
