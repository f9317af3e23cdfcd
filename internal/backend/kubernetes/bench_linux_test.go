package kubernetes_test

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// BenchmarkNoNodeFirstPod is what the first pod of a run costs: through
// the backend (what the run needs asked of the cluster, the run's Lease,
// then the pod that it owns, then the Lease looked up again) and as a bare
// create of the same pod; and a later pod of the run.
func BenchmarkNoNodeFirstPod(b *testing.B) {
	cs := kubetest.Client(b)
	ns := kubetest.Namespace(b, cs, "rz-bench-")
	d := open(b, ns, kubernetes.DefaultLeaseSeconds)
	ctx := context.Background()
	spec := func(run string) backend.Spec {
		return backend.Spec{Image: never, Cmd: []string{"sleep", "3600"}, RunID: run, Ports: []string{"8080"}}
	}
	n := 0
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			n++
			run := fmt.Sprintf("%08x", n)
			pod, err := d.PodFor("rz-"+run+"-1", spec(run))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rightsize", func(b *testing.B) {
		for b.Loop() {
			// A driver of its own, as a test process has: the renewals of
			// the earlier runs would otherwise share its rate limit.
			b.StopTimer()
			d := open(b, ns, kubernetes.DefaultLeaseSeconds)
			n++
			run := fmt.Sprintf("%08x", n)
			b.StartTimer()
			if _, err := d.Start(ctx, "rz-"+run+"-1", spec(run)); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			d.Close()
			b.StartTimer()
		}
	})
	// A later pod of a run: the Lease looked up before and after, no
	// review asked (once per process), nothing made but the pod.
	b.Run("rightsize-later", func(b *testing.B) {
		n++
		run := fmt.Sprintf("%08x", n)
		if _, err := d.Start(ctx, "rz-"+run+"-0", spec(run)); err != nil {
			b.Fatal(err)
		}
		i := 0
		for b.Loop() {
			i++
			if _, err := d.Start(ctx, fmt.Sprintf("rz-%s-%d", run, i), spec(run)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNoNodeSIGKILLToDeletion is how long after the SIGKILL of a test
// process its run's pods have a deletionTimestamp (or are gone), through
// its native watchdog and the garbage collector: ms/kill.
func BenchmarkNoNodeSIGKILLToDeletion(b *testing.B) {
	cs := kubetest.Client(b)
	ns := kubetest.Namespace(b, cs, "rz-bench-kill-")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var total time.Duration
	kills := 0
	for b.Loop() {
		o := startOwner(b, ns, kubernetes.DefaultLeaseSeconds)
		o.KillAndWait()
		var slowest time.Duration
		for _, name := range o.pods {
			slowest = max(slowest, waitDeleted(ctx, b, cs, ns, name, o.KilledAt()))
		}
		total += slowest
		kills++
		proctest.WaitUntil(b, time.Minute, "the watchdog ended", func() bool { return gone(o.watchdog) })
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(kills), "ms/kill")
}

// BenchmarkNoNodeMachineGone is the owner's machine gone, watchdog too, at
// the default lease duration: from the SIGKILL of both until the run's pods
// have a deletionTimestamp, through a sweep from another cache dir every
// 100 ms (what a stream of test processes elsewhere gives): ms/kill.
func BenchmarkNoNodeMachineGone(b *testing.B) {
	cs := kubetest.Client(b)
	ns := kubetest.Namespace(b, cs, "rz-bench-gone-")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	elsewhere := open(b, ns, kubernetes.DefaultLeaseSeconds)
	var total time.Duration
	kills := 0
	for b.Loop() {
		o := startOwner(b, ns, kubernetes.DefaultLeaseSeconds)
		if err := syscall.Kill(o.watchdog, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		o.KillAndWait()
		proctest.WaitUntil(b, time.Minute, "a sweep drops the lapsed Lease", func() bool {
			rep, err := reaper.Sweep(ctx, elsewhere, reaper.WithCacheDir(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			if slices.Contains(rep.Lapsed, o.run) {
				return true
			}
			time.Sleep(100 * time.Millisecond)
			return false
		})
		var slowest time.Duration
		for _, name := range o.pods {
			slowest = max(slowest, waitDeleted(ctx, b, cs, ns, name, o.KilledAt()))
		}
		total += slowest
		kills++
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(kills), "ms/kill")
}

// BenchmarkNodeFirstPod is what the first pod of a run costs on a node,
// until it runs: through the backend (Driver.Create: the run's Lease, the
// pod it owns, the wait until it runs) and as a bare create of the same
// pod polled the same way. Each pod is deleted, untimed, before the next.
func BenchmarkNodeFirstPod(b *testing.B) {
	img := kubetest.Busybox(b)
	cs := kubetest.Client(b)
	ns := kubetest.Namespace(b, cs, "rz-bench-node-")
	ctx := context.Background()
	spec := func(run string) backend.Spec {
		return backend.Spec{Image: img, Cmd: []string{"/server"}, RunID: run, Ports: []string{"8080"}}
	}
	n := 0
	del := func(name string) {
		b.StopTimer()
		zero := int64(0)
		_ = cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		b.StartTimer()
	}
	d := open(b, ns, kubernetes.DefaultLeaseSeconds)
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			n++
			run := fmt.Sprintf("%08x", n)
			pod, err := d.PodFor("rz-"+run+"-1", spec(run))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			for {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if p.Status.Phase == corev1.PodRunning {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			del(pod.Name)
		}
	})
	b.Run("rightsize", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			d := open(b, ns, kubernetes.DefaultLeaseSeconds)
			n++
			run := fmt.Sprintf("%08x", n)
			b.StartTimer()
			if _, err := d.Create(ctx, "rz-"+run+"-1", spec(run)); err != nil {
				b.Fatal(err)
			}
			del("rz-" + run + "-1")
			b.StopTimer()
			d.Close()
			b.StartTimer()
		}
	})
}

// BenchmarkNodeSIGKILLToGone is how long after the SIGKILL of a test
// process whose 2 pods run on the node those pods are gone: its watchdog
// deletes the Lease, the garbage collector the pods, the kubelet ends
// their containers and confirms: ms/kill.
func BenchmarkNodeSIGKILLToGone(b *testing.B) {
	img := kubetest.Busybox(b)
	cs := kubetest.Client(b)
	ns := kubetest.Namespace(b, cs, "rz-bench-nkill-")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var total time.Duration
	kills := 0
	for b.Loop() {
		o := startOwnerWith(b, ns, kubernetes.DefaultLeaseSeconds, []string{envOwnerImage + "=" + img})
		o.KillAndWait()
		var slowest time.Duration
		for _, name := range o.pods {
			for {
				_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					break
				}
				if ctx.Err() != nil {
					b.Fatalf("pod %s not gone", name)
				}
				time.Sleep(5 * time.Millisecond)
			}
			slowest = max(slowest, time.Since(o.KilledAt()))
		}
		total += slowest
		kills++
		proctest.WaitUntil(b, time.Minute, "the watchdog ended", func() bool { return gone(o.watchdog) })
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(kills), "ms/kill")
}
