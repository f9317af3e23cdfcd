//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rightsize/rightsize-go/internal/kubetest"
)

// kubeSide is the Kubernetes test cluster (scripts/kube.sh, with its
// node): what a run makes (pods, Services, ConfigMaps, its Lease) in a
// namespace of the harness's own is read from the API server's watch
// streams as it happens. The API server does not say which process asked
// for a deletion, so a deletion counts as the owner's own while the owner
// is inside an operation (a start that failed and releases what it made,
// a stop), within ownGrace after one, or ending itself (a clean end's
// cleanups, a panic's); any other deletion must come after its death. A
// pod counts as removed when its deletion begins (deletionTimestamp).
// With -faults, the owners and the sweepers reach the API server through
// a TCP proxy that now and then drops every connection and closes new ones
// at once for a moment: the API server briefly unreachable.
type kubeSide struct {
	cs    kubernetes.Interface
	ns    string
	proxy *outageProxy

	mu   sync.Mutex
	objs map[string]*object // kind/name
	last time.Time          // the last event taken
}

// ownGrace is how long after an operation of its own ended an owner's
// deletion may still be seen: a watch event is a moment behind the call.
const ownGrace = 2 * time.Second

// kubeKinds are the kinds of a run's objects, as the checker names them.
var kubeKinds = []string{"pod", "service", "configmap", "lease"}

func (k *kubeSide) setup(ctx context.Context, h *harness, e *engine) error {
	kc, node := os.Getenv(kubetest.EnvKubeconfig), os.Getenv(kubetest.EnvNode)
	if kc == "" || node == "" {
		return fmt.Errorf("-backend kubernetes needs the test cluster and its node: %s=$(bash scripts/kube.sh start) %s=$(bash scripts/kube.sh node)", kubetest.EnvKubeconfig, kubetest.EnvNode)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return fmt.Errorf("%s=%s: %w", kubetest.EnvKubeconfig, kc, err)
	}
	// No client timeout: it would cut every watch after it (each call has
	// a context of its own).
	cfg.QPS, cfg.Burst = 100, 200
	if k.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if e.image, err = kubetest.ImportBusybox(node); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ns, err := k.cs.CoreV1().Namespaces().Create(cctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rz-chaos-"}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the harness's namespace: %w", err)
	}
	k.ns, k.objs = ns.Name, map[string]*object{}
	if err := k.setupIn(ctx, h, e, cfg.Host, kc); err != nil {
		k.cleanup(ctx, h) // the namespace is the harness's to delete, setup or not
		return err
	}
	return nil
}

// setupIn is setup's part once the namespace is made.
func (k *kubeSide) setupIn(ctx context.Context, h *harness, e *engine, host, kc string) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := kubetest.WaitThere(cctx, k.cs.CoreV1().ServiceAccounts(k.ns).Get, "default"); err != nil {
		return fmt.Errorf("namespace %s: its default ServiceAccount: %w", k.ns, err)
	}
	owners := kc
	if e.faults != nil {
		u, err := url.Parse(host)
		if err != nil {
			return fmt.Errorf("the API server's address %q: %w", host, err)
		}
		if k.proxy, err = newOutageProxy(u.Host); err != nil {
			return err
		}
		e.faults.outage = k.proxy.outage
		owners = filepath.Join(h.work, "kubeconfig")
		raw, err := clientcmd.LoadFromFile(kc)
		if err != nil {
			return err
		}
		for _, c := range raw.Clusters {
			c.Server = "https://" + k.proxy.addr
			// The API server's certificate names 127.0.0.1, where the
			// proxy listens too: the port alone differs.
		}
		if err := clientcmd.WriteToFile(*raw, owners); err != nil {
			return err
		}
	}
	e.env = append(e.env, "RIGHTSIZE_BACKEND=kubernetes", "KUBECONFIG="+owners, "RIGHTSIZE_KUBE_NAMESPACE="+k.ns)
	return nil
}

// meta is what the harness reads of an object of any kind.
type meta struct {
	kind string
	m    metav1.Object
}

// list lists the run objects of kind (those with a run label).
func (k *kubeSide) list(ctx context.Context, kind string) ([]meta, string, error) {
	opts := metav1.ListOptions{LabelSelector: labelRun}
	var out []meta
	var rv string
	switch kind {
	case "pod":
		l, err := k.cs.CoreV1().Pods(k.ns).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		for i := range l.Items {
			out = append(out, meta{kind, &l.Items[i]})
		}
		rv = l.ResourceVersion
	case "service":
		l, err := k.cs.CoreV1().Services(k.ns).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		for i := range l.Items {
			out = append(out, meta{kind, &l.Items[i]})
		}
		rv = l.ResourceVersion
	case "configmap":
		l, err := k.cs.CoreV1().ConfigMaps(k.ns).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		for i := range l.Items {
			out = append(out, meta{kind, &l.Items[i]})
		}
		rv = l.ResourceVersion
	case "lease":
		l, err := k.cs.CoordinationV1().Leases(k.ns).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		for i := range l.Items {
			out = append(out, meta{kind, &l.Items[i]})
		}
		rv = l.ResourceVersion
	}
	return out, rv, nil
}

func (k *kubeSide) watch(ctx context.Context, kind, rv string) (watch.Interface, error) {
	opts := metav1.ListOptions{LabelSelector: labelRun, ResourceVersion: rv}
	switch kind {
	case "pod":
		return k.cs.CoreV1().Pods(k.ns).Watch(ctx, opts)
	case "service":
		return k.cs.CoreV1().Services(k.ns).Watch(ctx, opts)
	case "configmap":
		return k.cs.CoreV1().ConfigMaps(k.ns).Watch(ctx, opts)
	default:
		return k.cs.CoordinationV1().Leases(k.ns).Watch(ctx, opts)
	}
}

// follow lists and watches each kind until ctx ends; a watch that breaks
// is taken up again by a list, whose differences are what happened in
// between.
func (k *kubeSide) follow(ctx context.Context, h *harness) {
	var wg sync.WaitGroup
	for _, kind := range kubeKinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.followKind(ctx, h, kind)
		}()
	}
	wg.Wait()
}

func (k *kubeSide) followKind(ctx context.Context, h *harness, kind string) {
	for ctx.Err() == nil {
		items, rv, err := k.list(ctx, kind)
		if err != nil {
			pause(ctx, 200*time.Millisecond)
			continue
		}
		now := time.Now()
		there := map[string]bool{}
		for _, it := range items {
			there[it.m.GetName()] = true
			k.take(h, it, watch.Modified, now)
		}
		k.mu.Lock()
		var gone []object
		for key, o := range k.objs {
			if o.kind == kind && !there[o.name] {
				gone = append(gone, *o)
				delete(k.objs, key)
			}
		}
		k.mu.Unlock()
		for _, o := range gone {
			k.judge(h, o, now)
		}
		w, err := k.watch(ctx, kind, rv)
		if err != nil {
			pause(ctx, 200*time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			if m, ok := ev.Object.(metav1.Object); ok {
				k.take(h, meta{kind, m}, ev.Type, time.Now())
			}
		}
		w.Stop()
	}
}

// take is one object as a list or a watch event shows it at at.
func (k *kubeSide) take(h *harness, it meta, ev watch.EventType, at time.Time) {
	name := it.m.GetName()
	key := it.kind + "/" + name
	run := firstOf(it.m.GetLabels()[labelRun], it.m.GetLabels()[labelRunAlt])
	if run == "" {
		return
	}
	going := ev == watch.Deleted || it.m.GetDeletionTimestamp() != nil
	k.mu.Lock()
	k.last = at
	o, known := k.objs[key]
	switch {
	case !known && !going:
		obj := &object{kind: it.kind, name: name, id: string(it.m.GetUID()), run: run, at: at}
		k.objs[key] = obj
		k.mu.Unlock()
		h.created(*obj)
		return
	case known && going:
		delete(k.objs, key)
		k.mu.Unlock()
		k.judge(h, *o, at)
		return
	}
	k.mu.Unlock()
}

// judge hands a removal seen at at to the checker, as the owner's own
// when the owner was at work on its objects then (kubeSide's doc).
func (k *kubeSide) judge(h *harness, o object, at time.Time) {
	by := 0
	h.mu.Lock()
	ow := h.byRun[o.run]
	// Its Lease goes by its own hand only at its end: inside a step, the
	// Lease's deletion (and the pods the cluster takes with it) is
	// someone else's.
	if ow != nil && ow.aliveLocked(at) && (o.kind == "lease" && ow.endingLocked(at) || o.kind != "lease" && ow.mayRemoveLocked(at)) {
		by = ow.pid
	}
	h.mu.Unlock()
	h.removedAt(o, by, at, at, at, nil)
}

func (k *kubeSide) settle(ctx context.Context, _ *harness) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		k.mu.Lock()
		caught := time.Since(k.last) > time.Second
		k.mu.Unlock()
		if caught {
			return
		}
		pause(ctx, 100*time.Millisecond)
	}
}

// leftovers lists the run objects of the namespace not being deleted: a
// pod being deleted is the kubelet's to end, and gone as far as the run
// is concerned.
func (k *kubeSide) leftovers(ctx context.Context, h *harness) []leftover {
	var out []leftover
	for _, kind := range kubeKinds {
		items, _, err := k.list(ctx, kind)
		if err != nil {
			out = append(out, leftover{msg: "listing the namespace's " + kind + "s: " + err.Error()})
			continue
		}
		for _, it := range items {
			if it.m.GetDeletionTimestamp() != nil {
				continue
			}
			run := firstOf(it.m.GetLabels()[labelRun], it.m.GetLabels()[labelRunAlt])
			h.mu.Lock()
			o := h.byRun[run]
			h.mu.Unlock()
			who := "no owner the harness knows"
			if o != nil {
				who = fmt.Sprintf("owner #%d", o.plan.Index)
			}
			out = append(out, leftover{owner: o, msg: fmt.Sprintf("%s %s of run %s (%s) is still in the cluster after every owner died and a sweep ran", kind, it.m.GetName(), run, who)})
		}
	}
	return out
}

// cleanup deletes the harness's namespace, and all it holds.
func (k *kubeSide) cleanup(ctx context.Context, _ *harness) {
	if k.cs == nil || k.ns == "" {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := k.cs.CoreV1().Namespaces().Delete(cctx, k.ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Printf("chaos: delete namespace %s: %v\n", k.ns, err)
		return
	}
	if err := kubetest.WaitGone(cctx, k.cs.CoreV1().Namespaces().Get, k.ns); err != nil {
		fmt.Printf("chaos: namespace %s, deleted: %v\n", k.ns, err)
	}
}

func (k *kubeSide) close() {
	if k.proxy != nil {
		k.proxy.close()
	}
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// outageProxy forwards TCP connections to the API server; an outage drops
// every connection it carries and closes each new one at once until it
// ends.
type outageProxy struct {
	ln     net.Listener
	addr   string
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func newOutageProxy(target string) (*outageProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &outageProxy{ln: ln, addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	return p, nil
}

func (p *outageProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		go p.carry(c)
	}
}

func (p *outageProxy) carry(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// outage makes the API server unreachable through the proxy for d.
func (p *outageProxy) outage(ctx context.Context, d time.Duration) {
	p.mu.Lock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	pause(ctx, d)
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func (p *outageProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}
