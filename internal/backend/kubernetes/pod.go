package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/origin"
)

// container is the name of a sandbox pod's one container.
const containerName = "sandbox"

var listOne = metav1.ListOptions{Limit: 1}

// ErrNoNode is what a wait for a pod wraps when no node ran the pod: the
// cluster stored it, and it was never scheduled or never started.
var ErrNoNode = errors.New("no node ran the pod")

// ErrPull is what a wait for a pod wraps, beside ErrNoNode, when its node
// could not pull its image: the wait ends as soon as the node says so,
// with its reason.
var ErrPull = errors.New("the pod's image could not be pulled")

// Start creates the pod of a sandbox, owned by its run's Lease (made at the
// run's first create, and again when it was lost), and returns without
// waiting for a node to run it. A network's aliases become headless
// Services selecting the pod. What the spec uses beside the run's own
// calls (files, aliases) is first checked to be allowed, once per process.
// The Lease is looked up again once all is made: one deleted in between
// (its pod is the garbage collector's) fails the start, saying so.
func (d *Driver) Start(ctx context.Context, name string, spec backend.Spec) (*Sandbox, error) {
	pod, err := d.podFor(name, spec)
	if err != nil {
		return nil, err
	}
	// What made it: whole in annotations, and as a label where the test's
	// name has a label's form (origin.KubeLabels).
	o := origin.FromContext(ctx)
	maps.Copy(pod.Labels, o.KubeLabels())
	pod.Annotations = o.Labels()
	cm := filesMap(pod, spec.Files)
	var needs []right
	if cm != nil {
		needs = append(needs, filesAccess...)
	}
	for _, aliases := range spec.Networks {
		if len(aliases) > 0 {
			needs = append(needs, aliasAccess...)
			break
		}
	}
	if err := d.need(ctx, "pod "+name, needs...); err != nil {
		return nil, err
	}
	rl, ref, err := d.owner(ctx, spec.RunID)
	if err != nil {
		return nil, err
	}
	pod.OwnerReferences = []metav1.OwnerReference{ref}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	if cm != nil {
		cm.OwnerReferences = []metav1.OwnerReference{ref}
		if _, err := d.cs.CoreV1().ConfigMaps(d.ns).Create(cctx, cm, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("kubernetes: the files of pod %s/%s: a ConfigMap of that name exists: %w", d.ns, name, backend.ErrNameTaken)
			}
			return nil, d.apiError("create ConfigMap "+name+" (the pod's files)", err)
		}
	}
	if _, err := d.cs.CoreV1().Pods(d.ns).Create(cctx, pod, metav1.CreateOptions{}); err != nil {
		if cm != nil {
			// No pod of ours mounts it: gone now rather than with the Lease.
			_ = d.deleteFiles(context.WithoutCancel(ctx), spec.RunID, name)
		}
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("kubernetes: pod %s/%s: %w", d.ns, name, backend.ErrNameTaken)
		}
		return nil, d.apiError("create pod "+name, err)
	}
	for _, net := range slices.Sorted(maps.Keys(spec.Networks)) {
		for _, alias := range spec.Networks[net] {
			if err := d.createAlias(cctx, ref, spec.RunID, net, alias, name, pod.Spec.Containers[0].Ports); err != nil {
				return nil, err
			}
		}
	}
	if d.afterCreate != nil {
		d.afterCreate(name)
	}
	if err := d.stillOwned(cctx, rl, ref); err != nil {
		return nil, fmt.Errorf("kubernetes: pod %s/%s was made as its owner went: the cluster deletes it: %w", d.ns, name, err)
	}
	return &Sandbox{d: d, name: name, run: spec.RunID, files: cm != nil, spec: &spec, lease: rl, owner: ref.UID}, nil
}

// stillOwned: the Lease ref names is there, as the garbage collector
// would find it. Gone, or another of its name, it is lost, and the error
// says so.
func (d *Driver) stillOwned(ctx context.Context, rl *runLease, ref metav1.OwnerReference) error {
	l, err := d.cs.CoordinationV1().Leases(d.ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		d.lose(rl, ref.UID, "found gone as a pod was made")
	case err != nil:
		return d.apiError("get Lease "+ref.Name, err)
	case l.UID != ref.UID:
		d.lose(rl, ref.UID, "found made again, by someone else, as a pod was made")
	default:
		return nil
	}
	return rl.errFor(ref.UID)
}

// Create creates the sandbox's pod and waits until it runs, within
// RIGHTSIZE_KUBE_START_TIMEOUT (120 s): the error then wraps ErrNoNode when
// no node ran it, and ErrPull, as soon as the node says so, when its image
// could not be pulled. Then Spec.WaitingFor, a testcontainers-go strategy, waits
// on the pod as it would on a container (target). On error the pod may
// exist: the caller removes it by name.
func (d *Driver) Create(ctx context.Context, name string, spec backend.Spec) (backend.Sandbox, error) {
	sb, err := d.Start(ctx, name, spec)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, d.start)
	defer cancel()
	if err := sb.WaitRunning(wctx); err != nil {
		return nil, err
	}
	if spec.WaitingFor != nil {
		if err := spec.WaitingFor.WaitUntilReady(ctx, &target{s: sb}); err != nil {
			sb.stopForwards()
			return nil, fmt.Errorf("kubernetes: pod %s/%s runs, but its wait strategy failed: %w", d.ns, name, err)
		}
	}
	return sb, nil
}

func startTimeout(getenv func(string) string) (time.Duration, error) {
	v := strings.TrimSpace(getenv(EnvStartTimeout))
	if v == "" {
		return 120 * time.Second, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("kubernetes: %s=%q: want whole seconds, at least 1", EnvStartTimeout, v)
	}
	return time.Duration(n) * time.Second, nil
}

// podFor is the pod of spec, refused when spec asks for what this backend
// does not do.
func (d *Driver) podFor(name string, spec backend.Spec) (*corev1.Pod, error) {
	switch {
	case !dnsSubdomain(name):
		return nil, fmt.Errorf("kubernetes: sandbox name %q is not a pod name (lower-case letters, digits, '-' and '.')", name)
	case spec.RunID == "" || spec.KeepAlive != "":
		return nil, errors.New("kubernetes: keep-alive sandboxes are not supported: a sandbox is a run's")
	case !validRunID(spec.RunID):
		return nil, fmt.Errorf("kubernetes: run id %q cannot name a Lease", spec.RunID)
	case spec.Image == "":
		return nil, errors.New("kubernetes: the spec names no image")
	case len(spec.Customize) > 0:
		return nil, errors.New("kubernetes: Customize is testcontainers-go's, for the docker backend")
	case len(spec.Volumes) > 0:
		return nil, errors.New("kubernetes: named volumes are not supported: a pod mounts none of the run's")
	}
	lb := maps.Clone(spec.Labels)
	if lb == nil {
		lb = map[string]string{}
	}
	for k := range lb {
		if strings.HasPrefix(k, "dev.rightsize.") {
			return nil, fmt.Errorf("kubernetes: label %q: the dev.rightsize. labels are rightsize's own", k)
		}
	}
	maps.Copy(lb, runLabels(spec.RunID))
	lb[LabelSandbox] = name
	c := corev1.Container{Name: containerName, Image: spec.Image, Args: spec.Cmd}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
	}
	for _, p := range spec.Ports {
		cp, err := containerPort(p)
		if err != nil {
			return nil, err
		}
		c.Ports = append(c.Ports, cp)
	}
	if spec.MemoryLimitMB > 0 {
		q := resource.NewQuantity(int64(spec.MemoryLimitMB)<<20, resource.BinarySI)
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: *q}
	}
	for net, aliases := range spec.Networks {
		if !labelValue(net) {
			return nil, fmt.Errorf("kubernetes: network %q cannot be a label value", net)
		}
		for _, a := range aliases {
			if !dnsLabel(a) || a[0] >= '0' && a[0] <= '9' {
				return nil, fmt.Errorf("kubernetes: alias %q on network %s is not a Service name (a DNS label starting with a letter)", a, net)
			}
		}
	}
	no, grace := false, int64(backend.DefaultStopGrace/time.Second)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lb},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{c},
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
		},
	}
	if err := mountFiles(pod, spec.Files); err != nil {
		return nil, err
	}
	return pod, nil
}

func containerPort(p string) (corev1.ContainerPort, error) {
	num, proto, _ := strings.Cut(p, "/")
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n > 65535 {
		return corev1.ContainerPort{}, fmt.Errorf("kubernetes: port %q: want a number from 1 to 65535, then /tcp, /udp or /sctp", p)
	}
	cp := corev1.ContainerPort{ContainerPort: int32(n), Protocol: corev1.ProtocolTCP}
	switch strings.ToLower(proto) {
	case "", "tcp":
	case "udp":
		cp.Protocol = corev1.ProtocolUDP
	case "sctp":
		cp.Protocol = corev1.ProtocolSCTP
	default:
		return corev1.ContainerPort{}, fmt.Errorf("kubernetes: port %q: protocol %q", p, proto)
	}
	return cp, nil
}

// labelValue: what a label's value may be.
func labelValue(s string) bool {
	if s == "" || len(s) > 63 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for _, c := range []byte(s) {
		if !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// createAlias makes the headless Service alias, selecting pod, on network
// net: pods of the namespace reach the pod by that name.
func (d *Driver) createAlias(ctx context.Context, ref metav1.OwnerReference, runID, net, alias, pod string, ports []corev1.ContainerPort) error {
	lb := runLabels(runID)
	lb[LabelNetwork] = net
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: alias, Labels: lb, OwnerReferences: []metav1.OwnerReference{ref}},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{LabelSandbox: pod},
		},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: strings.ToLower(string(p.Protocol)) + "-" + strconv.Itoa(int(p.ContainerPort)), Port: p.ContainerPort, Protocol: p.Protocol,
		})
	}
	if _, err := d.cs.CoreV1().Services(d.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubernetes: alias %s of network %s: a Service of that name exists: %w", alias, net, backend.ErrNameTaken)
		}
		return d.apiError("create Service "+alias, err)
	}
	return nil
}

// CreateNetwork takes note of network name for run runID. Nothing is
// created until a sandbox joins it with an alias (a Service); its id is
// its name.
func (d *Driver) CreateNetwork(ctx context.Context, name, runID string) (string, error) {
	if !labelValue(name) {
		return "", fmt.Errorf("kubernetes: network %q cannot be a label value", name)
	}
	if !validRunID(runID) {
		return "", fmt.Errorf("kubernetes: run id %q cannot name a Lease", runID)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.networks[name]; ok && r != runID {
		return "", fmt.Errorf("kubernetes: network %s: %w", name, backend.ErrNameTaken)
	}
	d.networks[name] = runID
	return name, nil
}

// Adopt returns the running pod name.
func (d *Driver) Adopt(ctx context.Context, name string) (backend.Sandbox, error) {
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	p, err := d.cs.CoreV1().Pods(d.ns).Get(cctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("kubernetes: pod %s/%s: %w", d.ns, name, backend.ErrNotFound)
	}
	if err != nil {
		return nil, d.apiError("get pod "+name, err)
	}
	switch {
	case p.DeletionTimestamp != nil:
		return nil, fmt.Errorf("kubernetes: pod %s/%s is being deleted: %w: %w", d.ns, name, backend.ErrNotFound, backend.ErrStopped)
	case p.Status.Phase == corev1.PodRunning:
		return &Sandbox{d: d, name: name, run: p.Labels[backend.LabelRunID], files: hasFiles(p)}, nil
	case p.Status.Phase == corev1.PodPending || p.Status.Phase == "":
		return nil, fmt.Errorf("kubernetes: pod %s/%s is pending: %w: %w", d.ns, name, backend.ErrNotFound, backend.ErrStarting)
	}
	return nil, fmt.Errorf("kubernetes: pod %s/%s has ended (%s): %w: %w", d.ns, name, p.Status.Phase, backend.ErrNotFound, backend.ErrStopped)
}

// Remove deletes, of the pods or networks named, those that carry run
// runID's label: a pod by the UID its lookup gave, at once (no grace); a
// network by deleting its Services. What carries another mark, or none, is
// left alone (ErrNotOwned).
func (d *Driver) Remove(ctx context.Context, k backend.Kind, runID string, names []string) []error {
	return d.each(ctx, k, runID, names, true)
}

// CheckOwned is Remove's lookup and ownership check alone.
func (d *Driver) CheckOwned(ctx context.Context, k backend.Kind, runID string, names []string) []error {
	return d.each(ctx, k, runID, names, false)
}

func (d *Driver) each(ctx context.Context, k backend.Kind, runID string, names []string, remove bool) []error {
	errs := make([]error, len(names))
	for i, n := range names {
		if runID == "" {
			errs[i] = errors.New("kubernetes: remove: no run id to check ownership against")
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, CallTimeout)
		if k == backend.NetworkKind {
			errs[i] = d.removeNetwork(cctx, runID, n, remove)
		} else {
			errs[i] = d.removePod(cctx, runID, n, remove)
		}
		cancel()
	}
	return errs
}

func (d *Driver) removePod(ctx context.Context, runID, name string, remove bool) error {
	if !dnsSubdomain(name) {
		// A ledger line no pod can be named by: nothing to remove.
		return fmt.Errorf("kubernetes: %q is no pod name: %w", name, backend.ErrNotFound)
	}
	p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: pod %s/%s: %w", d.ns, name, backend.ErrNotFound)
	}
	if err != nil {
		return d.apiError("get pod "+name, err)
	}
	if err := owned(p.Labels, runID, "pod "+d.ns+"/"+name); err != nil {
		return err
	}
	if !remove {
		return nil
	}
	if err := d.deletePod(ctx, p, 0); err != nil {
		return err
	}
	return d.deletePodFiles(ctx, p)
}

func (d *Driver) deletePod(ctx context.Context, p *corev1.Pod, grace int64) error {
	err := d.cs.CoreV1().Pods(d.ns).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID},
	})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err): // gone, or another pod of that name now
		return fmt.Errorf("kubernetes: pod %s/%s: %w", d.ns, p.Name, backend.ErrNotFound)
	}
	return d.apiError("delete pod "+p.Name, err)
}

// owned: the labels are run runID's.
func owned(lb map[string]string, runID, what string) error {
	switch v, ok := lb[backend.LabelRunID]; {
	case !ok || !validRunID(v):
		return fmt.Errorf("kubernetes: %s: %w: %w", what, backend.ErrNotOwned, backend.ErrUnlabelled)
	case v != runID:
		return fmt.Errorf("kubernetes: %s is run %s's: %w", what, v, backend.ErrNotOwned)
	}
	return nil
}

func (d *Driver) removeNetwork(ctx context.Context, runID, name string, remove bool) error {
	if !labelValue(name) {
		return fmt.Errorf("kubernetes: network %q: %w", name, backend.ErrNotFound)
	}
	list, err := d.cs.CoreV1().Services(d.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{LabelNetwork: name}.String()})
	if err != nil {
		return d.apiError("list Services of network "+name, err)
	}
	if len(list.Items) == 0 {
		d.forgetNetwork(name)
		return fmt.Errorf("kubernetes: network %s has no Service: %w", name, backend.ErrNotFound)
	}
	for _, s := range list.Items {
		if err := owned(s.Labels, runID, "Service "+s.Name+" of network "+name); err != nil {
			return err
		}
	}
	if !remove {
		return nil
	}
	var errs []error
	for _, s := range list.Items {
		err := d.cs.CoreV1().Services(d.ns).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, d.apiError("delete Service "+s.Name, err))
		}
	}
	if len(errs) == 0 {
		d.forgetNetwork(name)
	}
	return errors.Join(errs...)
}

func (d *Driver) forgetNetwork(name string) {
	d.mu.Lock()
	delete(d.networks, name)
	d.mu.Unlock()
}

// ListRun returns the names of run runID's pods, or of the networks its
// Services give aliases on; for pods these are also their ids.
func (d *Driver) ListRun(ctx context.Context, k backend.Kind, runID string) ([]string, error) {
	if !validRunID(runID) {
		return nil, fmt.Errorf("kubernetes: run id %q cannot be a label value", runID)
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: labels.Set{backend.LabelRunID: runID}.String()}
	var out []string
	if k == backend.NetworkKind {
		list, err := d.cs.CoreV1().Services(d.ns).List(cctx, sel)
		if err != nil {
			return nil, d.apiError("list Services", err)
		}
		for _, s := range list.Items {
			if n := s.Labels[LabelNetwork]; n != "" && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out, nil
	}
	list, err := d.cs.CoreV1().Pods(d.ns).List(cctx, sel)
	if err != nil {
		return nil, d.apiError("list pods", err)
	}
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	return out, nil
}

// RemoveIDs deletes pods (their ids are their names) or networks' Services
// that carry a run's label: the run that told them is the one whose label
// they carry, as the owner of this namespace's names.
func (d *Driver) RemoveIDs(ctx context.Context, k backend.Kind, ids []string) []error {
	errs := make([]error, len(ids))
	for i, id := range ids {
		cctx, cancel := context.WithTimeout(ctx, CallTimeout)
		errs[i] = d.removeAnyRun(cctx, k, id)
		cancel()
	}
	return errs
}

func (d *Driver) removeAnyRun(ctx context.Context, k backend.Kind, id string) error {
	if k == backend.NetworkKind {
		list, err := d.cs.CoreV1().Services(d.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{LabelNetwork: id}.String(), Limit: 1})
		if err != nil {
			return d.apiError("list Services of network "+id, err)
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("kubernetes: network %s has no Service: %w", id, backend.ErrNotFound)
		}
		return d.removeNetwork(ctx, list.Items[0].Labels[backend.LabelRunID], id, true)
	}
	if !dnsSubdomain(id) {
		return fmt.Errorf("kubernetes: %q is no pod name: %w", id, backend.ErrNotFound)
	}
	p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: pod %s/%s: %w", d.ns, id, backend.ErrNotFound)
	}
	if err != nil {
		return d.apiError("get pod "+id, err)
	}
	if err := owned(p.Labels, p.Labels[backend.LabelRunID], "pod "+id); err != nil {
		return err
	}
	if err := d.deletePod(ctx, p, 0); err != nil {
		return err
	}
	return d.deletePodFiles(ctx, p)
}

// CloseRun deletes run runID's Lease, and with it, through the garbage
// collector, everything of the run; then what still carries its label.
func (d *Driver) CloseRun(ctx context.Context, runID string) ([]string, error) {
	var removed []string
	errs := []error{d.DropRun(ctx, runID, 0)}
	for _, k := range []backend.Kind{backend.SandboxKind, backend.NetworkKind} {
		ids, err := d.ListRun(ctx, k, runID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, err := range d.Remove(ctx, k, runID, ids) {
			switch {
			case err == nil:
				removed = append(removed, ids[i])
			case !errors.Is(err, backend.ErrNotFound):
				errs = append(errs, err)
			}
		}
	}
	return removed, errors.Join(errs...)
}
