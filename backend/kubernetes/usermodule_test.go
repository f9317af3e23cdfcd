//go:build linux

package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rightsize/rightsize-go/internal/backend"
	rzkube "github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/usermod"
)

// The crash guarantee on Kubernetes, on the user's path: a test binary of
// a module of its own, which links this package for its effect as the docs
// say and has no TestMain (internal/usermod), starts a Service network and
// two pods on the node, then is SIGKILLed, or its -test.timeout alarm
// fires, or it passes. Its watchdog — re-executed from sandboxtest's init,
// which Go runs before this package's backend has registered — deletes the
// run's Lease, and the garbage collector the pods: every pod of the run is
// being deleted or gone, and the Lease is gone, with no sweep run by
// anyone. Each pod says, in the cluster, which test made it.
func TestUserModuleOnNode(t *testing.T) {
	img := kubetest.Busybox(t)
	cs := kubetest.Client(t)
	bin := usermod.Build(t, usermod.Pods)
	for _, tc := range []struct {
		name    string
		timeout string
		pass    bool
	}{
		{name: "SIGKILL", timeout: "20m"},
		{name: "test timeout", timeout: "40s"},
		{name: "passes", timeout: "20m", pass: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := kubetest.Namespace(t, cs, "rz-usermod-")
			p, _, run := startUserPods(t, cs, bin, "user's test on kubernetes ("+tc.name+")", ns, t.TempDir(), img, tc.timeout, tc.pass)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Which test made each pod, as the cluster keeps it: the whole
			// origin in annotations, the test's name as a label too.
			for _, pod := range pods.Items {
				test, place := pod.Annotations[origin.LabelTest], pod.Annotations[origin.LabelPlace]
				if test != "TestHolds" || !strings.HasPrefix(place, "pod_test.go:") || pod.Labels[origin.LabelTest] != "TestHolds" {
					t.Errorf("pod %s says it was made by %q at %q (label %q); want TestHolds at pod_test.go:N, its call of the helper",
						pod.Name, test, place, pod.Labels[origin.LabelTest])
				}
			}
			var ended time.Time
			switch {
			case tc.pass:
				p.CloseStdin()
				if !p.Wait(2 * time.Minute) {
					t.Fatal("the passing test did not end")
				}
				if _, err := p.Exited(); err != nil {
					t.Fatalf("the passing test: %v\n%s", err, p.Output())
				}
				ended = time.Now()
			case tc.timeout == "20m":
				if err := p.Kill(); err != nil {
					t.Fatal(err)
				}
				if !p.Wait(time.Minute) {
					t.Fatal("the test did not die of SIGKILL")
				}
				if sig, ok := p.Signaled(); !ok || sig != syscall.SIGKILL {
					t.Fatalf("the test ended with %s, want SIGKILL", p.Status())
				}
				ended = p.KilledAt()
			default:
				if !p.Wait(2 * time.Minute) {
					t.Fatal("the -test.timeout alarm did not end the test")
				}
				if want := "panic: test timed out after " + tc.timeout; !strings.Contains(p.Output(), want) {
					t.Fatalf("want %q in the test's output:\n%s", want, p.Output())
				}
				ended = time.Now()
			}
			// The watchdog's work is a Lease deletion: on a loaded machine a
			// second or so; 90 s means it never came.
			ctx, cancel = context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			left := func() string {
				var out []string
				pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: backend.LabelRunID + "=" + run})
				if err != nil {
					return err.Error()
				}
				for _, pod := range pods.Items {
					if pod.DeletionTimestamp == nil {
						out = append(out, "pod "+pod.Name)
					}
				}
				leases, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return err.Error()
				}
				for _, l := range leases.Items {
					out = append(out, "lease "+l.Name)
				}
				return strings.Join(out, ", ")
			}
			var last string
			for {
				if last = left(); last == "" {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("run %s, %s: still there %s after the end: %s\nthe test's output:\n%s", run, tc.name, time.Since(ended).Round(time.Millisecond), last, p.Output())
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("run %s, %s: every pod being deleted and the Lease gone %s after the end (polled every 20 ms)", run, tc.name, time.Since(ended).Round(time.Millisecond))
			waitPodsGone(t, ctx, cs, ns, run)
		})
	}
}

// waitPodsGone waits until the run's pods are gone from the API server
// (the kubelet has stopped them), so the namespace's deletion finds none.
func waitPodsGone(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, run string) {
	t.Helper()
	for {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: backend.LabelRunID + "=" + run})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		if ctx.Err() != nil {
			n := 0
			if pods != nil {
				n = len(pods.Items)
			}
			t.Fatalf("%d pods of run %s were still there: %v", n, run, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// userPodsEnv is the environment of the user's test binary on namespace
// ns with cache dir cache, the image img, and the info file info; more is
// added.
func userPodsEnv(ns, cache, img, info string, more ...string) []string {
	env := envlist.Without(os.Environ(), func(k string) bool { return strings.HasPrefix(k, "RIGHTSIZE_") })
	env = append(env,
		"RIGHTSIZE_BACKEND=kubernetes",
		"KUBECONFIG="+os.Getenv(kubetest.EnvKubeconfig),
		"RIGHTSIZE_KUBE_NAMESPACE="+ns,
		"RIGHTSIZE_CACHE_DIR="+cache,
		usermod.EnvImage+"="+img,
		usermod.EnvInfo+"="+info,
	)
	return append(env, more...)
}

// startUserPods starts the user's TestHolds of bin on namespace ns with
// cache dir cache and the -test.timeout timeout, and waits until it says
// it started its two pods, which the namespace must hold; it
// returns what the test said and its run. With pass, it passes once its
// stdin closes; more is added to its environment.
func startUserPods(t *testing.T, cs kubernetes.Interface, bin, name, ns, cache, img, timeout string, pass bool, more ...string) (*proctest.Proc, usermod.Info, string) {
	t.Helper()
	info := filepath.Join(t.TempDir(), "info")
	more = append(more, "RIGHTSIZE_REAPER_DEBUG=1")
	if pass {
		more = append(more, usermod.EnvPass+"=1")
	}
	p, err := proctest.Start(proctest.Spec{
		Name: name,
		Argv: []string{bin, "-test.run=^TestHolds$", "-test.count=1", "-test.timeout=" + timeout},
		Env:  userPodsEnv(ns, cache, img, info, more...),
		Dir:  filepath.Dir(bin),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.EnsureDead() })
	done := make(chan struct{})
	go func() { p.Wait(10 * time.Minute); close(done) }()
	in, err := usermod.WaitBlocked(info, done, 3*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.Output())
	}
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: origin.LabelTest})
	if err != nil {
		t.Fatal(err)
	}
	var run string
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil && slices.Contains(in.Sandboxes, pod.Name) {
			run = pod.Labels[backend.LabelRunID]
		}
	}
	if len(in.Sandboxes) != 2 || run == "" {
		t.Fatalf("the user's test said it started %q; the namespace has %d pods", in.Sandboxes, len(pods.Items))
	}
	return p, in, run
}

// The user's path for a death no watchdog saw: the user's test and its
// watchdog are both SIGKILLed, and the run's Lease, long enough not to
// lapse meanwhile, stays with nobody to delete it. The next run of the
// user's tests, on the same cache dir, sweeps at its first pod: it drops
// the dead run's Lease, which its recorded owner held on this machine, and
// the garbage collector deletes the pods; the live run is left alone.
func TestUserModuleSweepsARunWhoseWatchdogDiedToo(t *testing.T) {
	img := kubetest.Busybox(t)
	cs := kubetest.Client(t)
	bin := usermod.Build(t, usermod.Pods)
	ns := kubetest.Namespace(t, cs, "rz-usersweep-")
	cache := t.TempDir()
	const leaseSeconds = 600
	lease := "RIGHTSIZE_KUBE_LEASE_SECONDS=" + strconv.Itoa(leaseSeconds)
	first, _, run := startUserPods(t, cs, bin, "the user's first test (SIGKILLed with its watchdog)", ns, cache, img, "20m", false, lease)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	wds := ledger.LiveWatchdogs(cache, run)
	if len(wds) == 0 {
		t.Fatalf("run %s has no live watchdog in %s", run, cache)
	}
	for _, pid := range wds {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill watchdog %d: %v", pid, err)
		}
	}
	proctest.WaitUntil(t, time.Minute, "the watchdogs ended", func() bool {
		for _, pid := range wds {
			if syscall.Kill(pid, 0) == nil {
				return false
			}
		}
		return true
	})
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	if !first.Wait(time.Minute) {
		t.Fatal("the test did not die of SIGKILL")
	}
	leaseName := rzkube.LeaseName(run)
	if _, err := cs.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{}); err != nil {
		t.Fatalf("run %s's Lease %s, with nobody left to delete it: %v", run, leaseName, err)
	}

	second, in2, _ := startUserPods(t, cs, bin, "the user's next test", ns, cache, img, "20m", true, lease)
	proctest.WaitUntil(t, 90*time.Second, "the dead run's Lease gone and its pods being deleted", func() bool {
		if _, err := cs.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: backend.LabelRunID + "=" + run})
		if err != nil {
			return false
		}
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	})
	live, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alive := 0
	for _, pod := range live.Items {
		if pod.Labels[backend.LabelRunID] != run && pod.DeletionTimestamp == nil {
			alive++
		}
	}
	if alive != 2 {
		t.Errorf("the next run's pods: %d live, want its 2 (%q)", alive, in2.Sandboxes)
	}
	second.CloseStdin()
	if !second.Wait(2 * time.Minute) {
		t.Fatal("the next test did not end")
	}
	if _, err := second.Exited(); err != nil {
		t.Fatalf("the next test: %v\n%s", err, second.Output())
	}
	waitPodsGone(t, ctx, cs, ns, run)
}
