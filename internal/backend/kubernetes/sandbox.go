package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// Sandbox is a run's pod.
type Sandbox struct {
	d    *Driver
	name string
	run  string
	// files: the pod mounts a ConfigMap of its name (Spec.Files).
	files bool
	// spec is what it was started with; nil for an adopted pod.
	spec *backend.Spec
	// lease is the run's hold on its Lease, and owner the uid of the Lease
	// that owns the pod; nil and "" for an adopted pod.
	lease *runLease
	owner types.UID

	fwMu      sync.Mutex
	forwards  map[int]*forward // by the pod's port
	fwStopped bool
}

// Name is the pod's name.
func (s *Sandbox) Name() string { return s.name }

// ID is the pod's name too: what the watchdog and the sweep delete it by.
func (s *Sandbox) ID() string { return s.name }

// Host is where this process reaches the pod's ports: 127.0.0.1, where
// MappedPort forwards them to, outside the cluster; the pod's address
// inside it ("" until a node runs the pod).
func (s *Sandbox) Host() string {
	if !s.d.inCluster {
		return "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	p, err := s.d.cs.CoreV1().Pods(s.d.ns).Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return p.Status.PodIP
}

// MappedPort is where this process reaches port ("8080", "8080/tcp") of
// the pod: inside the cluster the port itself, at the pod's address;
// outside it a port of 127.0.0.1 forwarded to the pod through the API
// server (pods/portforward), made at the first call and ended by Stop or
// this process's end. Kubernetes forwards TCP only.
func (s *Sandbox) MappedPort(ctx context.Context, port string) (string, error) {
	num, proto, _ := strings.Cut(port, "/")
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("kubernetes: port %q of pod %s/%s: not a port number", port, s.d.ns, s.name)
	}
	if s.d.inCluster {
		return num, nil
	}
	if proto != "" && !strings.EqualFold(proto, "tcp") {
		return "", fmt.Errorf("kubernetes: port %s of pod %s/%s: this process is outside the cluster, and a port-forward carries TCP only", port, s.d.ns, s.name)
	}
	if err := s.d.need(ctx, "a port-forward to pod "+s.name, forwardAccess...); err != nil {
		return "", err
	}
	local, err := s.forwardPort(n)
	if err != nil {
		return "", err
	}
	return strconv.Itoa(local), nil
}

// Logs is what the pod's container wrote so far.
func (s *Sandbox) Logs(ctx context.Context) (string, error) {
	what := "reading the logs of pod " + s.name
	if err := s.d.need(ctx, what, logAccess...); err != nil {
		return "", err
	}
	b, err := s.d.cs.CoreV1().Pods(s.d.ns).GetLogs(s.name, &corev1.PodLogOptions{Container: containerName}).DoRaw(ctx)
	if apierrors.IsForbidden(err) {
		return "", s.d.forbidden(what, logAccess[0], err)
	}
	if err != nil {
		return "", s.d.apiError("logs of pod "+s.name, err)
	}
	return string(b), nil
}

// Stop deletes the pod with at most grace for its process to end, and
// waits until the pod is gone.
func (s *Sandbox) Stop(ctx context.Context, grace time.Duration) error {
	s.stopForwards()
	cctx, cancel := context.WithTimeout(ctx, CallTimeout+grace)
	defer cancel()
	p, err := s.d.cs.CoreV1().Pods(s.d.ns).Get(cctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return s.stopped(cctx)
	}
	if err != nil {
		return s.d.apiError("get pod "+s.name, err)
	}
	if err := s.d.deletePod(cctx, p, int64(grace/time.Second)); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return err
	}
	for {
		_, err := s.d.cs.CoreV1().Pods(s.d.ns).Get(cctx, s.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return s.stopped(cctx)
		}
		if cctx.Err() != nil {
			return fmt.Errorf("kubernetes: pod %s/%s still there after its delete: %w", s.d.ns, s.name, context.Cause(cctx))
		}
		select {
		case <-cctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopped deletes what the gone pod leaves: its files' ConfigMap. The pod
// is gone, but when the Lease that owned it was lost, or its renewals
// refused, while the test held it, the error says so (ErrClaimLost).
func (s *Sandbox) stopped(ctx context.Context) error {
	var err error
	if s.files {
		err = s.d.deleteFiles(ctx, s.run, s.name)
	}
	if lost := s.lease.errFor(s.owner); lost != nil {
		return fmt.Errorf("kubernetes: pod %s/%s is gone, but the test may have lost it before its end: %w", s.d.ns, s.name, lost)
	}
	return err
}

// WaitRunning waits until a node runs the pod, or ctx ends: the error then
// wraps ErrNoNode and says what the cluster last said of the pod.
func (s *Sandbox) WaitRunning(ctx context.Context) error {
	var last *corev1.Pod
	for {
		p, err := s.d.cs.CoreV1().Pods(s.d.ns).Get(ctx, s.name, metav1.GetOptions{})
		switch {
		case err == nil:
			last = p
			switch p.Status.Phase {
			case corev1.PodRunning:
				return nil
			case corev1.PodSucceeded, corev1.PodFailed:
				return fmt.Errorf("kubernetes: pod %s/%s ended (%s) before it was waited for", s.d.ns, s.name, p.Status.Phase)
			}
			if why := pullFailed(p); why != "" {
				return fmt.Errorf("kubernetes: pod %s/%s: %w: %w: %s", s.d.ns, s.name, ErrNoNode, ErrPull, why)
			}
		case apierrors.IsNotFound(err):
			if lost := s.lease.errFor(s.owner); lost != nil {
				return fmt.Errorf("kubernetes: pod %s/%s was deleted while it was waited for: %w: %w", s.d.ns, s.name, backend.ErrNotFound, lost)
			}
			return fmt.Errorf("kubernetes: pod %s/%s was deleted while it was waited for: %w", s.d.ns, s.name, backend.ErrNotFound)
		case refusedForDeadline(err):
			// The wait's end, a moment early: the call would have ended
			// after it.
			return fmt.Errorf("kubernetes: pod %s/%s: %w: %s (%v)", s.d.ns, s.name, ErrNoNode, pending(last), context.DeadlineExceeded)
		case ctx.Err() == nil:
			return s.d.apiError("get pod "+s.name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubernetes: pod %s/%s: %w: %s (%v)", s.d.ns, s.name, ErrNoNode, pending(last), context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pullFailed says why p's node cannot pull its image, once the kubelet
// says so (it says ErrImagePull at the first failed pull, then
// ImagePullBackOff between its retries, for as long as the pod lives); ""
// while it has not said so.
func pullFailed(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "ImageInspectError":
			return fmt.Sprintf("node %s cannot pull image %q: %s: %s", p.Spec.NodeName, cs.Image, w.Reason, w.Message)
		}
	}
	return ""
}

// pending says why p is not running.
func pending(p *corev1.Pod) string {
	if p == nil {
		return "the pod was never read"
	}
	if p.Spec.NodeName == "" {
		why := "it was never scheduled to a node (does the cluster have a node and a scheduler?)"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				why = "it is unscheduled: " + c.Reason + ": " + c.Message
			}
		}
		return why
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return "node " + p.Spec.NodeName + " has not started it: " + w.Reason + ": " + w.Message
		}
	}
	return "node " + p.Spec.NodeName + " has not started it (phase " + string(p.Status.Phase) + ")"
}
