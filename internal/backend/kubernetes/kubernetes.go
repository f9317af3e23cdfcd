package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// Environment the backend reads.
const (
	// EnvNamespace names the namespace the run's objects go to.
	EnvNamespace = "RIGHTSIZE_KUBE_NAMESPACE"
	// EnvLeaseSeconds is the run Lease's duration in seconds (default 15,
	// at least 3): a run nobody renewed for that long is dead.
	EnvLeaseSeconds = "RIGHTSIZE_KUBE_LEASE_SECONDS"
	// EnvStartTimeout bounds how long Create waits for a pod to run, in
	// seconds (default 120).
	EnvStartTimeout = "RIGHTSIZE_KUBE_START_TIMEOUT"
)

// Labels of the objects of a run, beside backend.LabelRunID.
const (
	// LabelSandbox names the pod a sandbox is, for its Services' selectors.
	LabelSandbox = "dev.rightsize.sandbox"
	// LabelNetwork names the network a Service gives an alias on.
	LabelNetwork = "dev.rightsize.network"
)

// DefaultLeaseSeconds is a run Lease's duration unless EnvLeaseSeconds says
// otherwise.
const DefaultLeaseSeconds = 15

// CallTimeout bounds each call to the API server.
const CallTimeout = 30 * time.Second

func init() {
	backend.Register(backend.Kubernetes, func(ctx context.Context) (backend.Driver, error) {
		d, err := Open(ctx)
		if err != nil {
			return nil, err
		}
		return d, nil
	})
	// The watchdog's environment (Watchdog's plan) names the cluster and
	// namespace; the endpoint it is handed is DOCKER_HOST's, not ours.
	backend.RegisterEndpoint(backend.Kubernetes, func(string) (backend.Driver, error) {
		d, err := load(os.Getenv)
		if err != nil {
			return nil, err
		}
		return d, nil
	})
}

// Driver is the Kubernetes backend, for one namespace of one cluster.
type Driver struct {
	cs        k8s.Interface
	stream    *rest.Config // for exec and port-forward: no timeout of its own
	host      string       // the API server's URL
	ns        string
	inCluster bool
	// kubeconfig is the loading precedence, absolute, for the watchdog
	// (which runs in "/"); empty in a cluster.
	kubeconfig []string
	lease      time.Duration
	start      time.Duration // Create's bound on a pod's start

	mu       sync.Mutex
	runs     map[string]*runLease // by run id
	networks map[string]string    // network name → run id
	closed   chan struct{}
	once     sync.Once

	accessMu sync.Mutex
	allowed  map[access]bool // what the cluster was asked, and said (need)

	// warn says what the test must hear of though no call returned it (a
	// run's Lease lost); stderr, where `go test` shows a failing package's.
	warn func(msg string)
	// execStart bounds how long an Exec waits for its command to start
	// (the API server and the node to answer): CallTimeout.
	execStart time.Duration
	// afterCreate, when set, runs between a Start's creates and its check
	// of their owner (tests).
	afterCreate func(name string)
}

// Open opens the cluster of the kubeconfig (or the in-cluster
// configuration) and checks that the API server answers for the
// namespace. The error wraps backend.ErrUnreachable when it does not.
func Open(ctx context.Context) (*Driver, error) { return open(ctx, os.Getenv) }

func open(ctx context.Context, getenv func(string) string) (*Driver, error) {
	d, err := load(getenv)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	if _, err := d.cs.CoreV1().Pods(d.ns).List(cctx, listOne); err != nil {
		return nil, d.apiError("list pods", err)
	}
	return d, nil
}

// load reads the configuration (the environment through getenv) and
// makes the client, asking nothing.
func load(getenv func(string) string) (*Driver, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if v := getenv(clientcmd.RecommendedConfigPathEnvVar); v != "" {
		rules.Precedence = filepath.SplitList(v)
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, fmt.Errorf("kubernetes: no cluster configured: no kubeconfig (KUBECONFIG, %s) and not inside a cluster: %w", clientcmd.RecommendedHomeFile, err)
		}
		return nil, fmt.Errorf("kubernetes: kubeconfig: %w", err)
	}
	ns := strings.TrimSpace(getenv(EnvNamespace))
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("kubernetes: the kubeconfig context's namespace: %w", err)
		}
	}
	if !dnsLabel(ns) {
		return nil, fmt.Errorf("kubernetes: namespace %q (%s or the kubeconfig context) is not a DNS label", ns, EnvNamespace)
	}
	lease, err := leaseSeconds(getenv)
	if err != nil {
		return nil, err
	}
	start, err := startTimeout(getenv)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = CallTimeout
	// client-go's default of 5 calls a second would pace a run of many pods.
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: client: %w", err)
	}
	stream := rest.CopyConfig(cfg)
	stream.Timeout = 0
	d := &Driver{
		cs: cs, stream: stream, host: cfg.Host, ns: ns, lease: lease, start: start,
		runs: map[string]*runLease{}, networks: map[string]string{}, closed: make(chan struct{}),
		allowed: map[access]bool{}, warn: warnStderr, execStart: CallTimeout,
	}
	for _, p := range rules.GetLoadingPrecedence() {
		if abs, err := filepath.Abs(p); err == nil {
			d.kubeconfig = append(d.kubeconfig, abs)
		}
	}
	d.inCluster = getenv("KUBERNETES_SERVICE_HOST") != "" && !anyExists(d.kubeconfig)
	if d.inCluster {
		d.kubeconfig = nil
	}
	return d, nil
}

// warnStderr writes msg on this process's stderr as it is then (package
// testing may have swapped it).
func warnStderr(msg string) { fmt.Fprintln(os.Stderr, "rightsize: "+msg) }

func anyExists(paths []string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

func leaseSeconds(getenv func(string) string) (time.Duration, error) {
	v := strings.TrimSpace(getenv(EnvLeaseSeconds))
	if v == "" {
		return DefaultLeaseSeconds * time.Second, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 3 || n > 3600 {
		return 0, fmt.Errorf("kubernetes: %s=%q: want whole seconds from 3 to 3600", EnvLeaseSeconds, v)
	}
	return time.Duration(n) * time.Second, nil
}

// Name is backend.Kubernetes.
func (d *Driver) Name() string { return backend.Kubernetes }

// Endpoint is the API server's URL and the namespace: a run is reaped only
// through the namespace it was made in.
func (d *Driver) Endpoint() string { return d.host + "/namespaces/" + d.ns }

// DefaultEndpoint is false: no other member of the family makes runs on
// Kubernetes, so none of their runs (which record no endpoint) is ours.
func (d *Driver) DefaultEndpoint() bool { return false }

// Namespace is where the run's objects are.
func (d *Driver) Namespace() string { return d.ns }

// Host is where ports are reached from this process: inside the cluster a
// pod's own address (Sandbox.Host); outside it, nowhere yet (ports need a
// port-forward, which this backend does not make).
func (d *Driver) Host() string { return "" }

// Close stops this process's renewal of its runs' Leases (their watchdogs
// renew them until the process dies) and removes nothing.
func (d *Driver) Close() error {
	d.once.Do(func() { close(d.closed) })
	return nil
}

// Watchdog is the native watchdog, told which cluster and namespace to
// open: it renews the run's Lease while the owner lives and deletes it when
// the owner is gone (backend.RunHolder).
func (d *Driver) Watchdog(runID string) (backend.WatchdogPlan, error) {
	env := []string{backend.EnvBackend + "=" + backend.Kubernetes, EnvNamespace + "=" + d.ns,
		EnvLeaseSeconds + "=" + strconv.Itoa(int(d.lease/time.Second))}
	if len(d.kubeconfig) > 0 {
		env = append(env, clientcmd.RecommendedConfigPathEnvVar+"="+strings.Join(d.kubeconfig, string(filepath.ListSeparator)))
	}
	return backend.WatchdogPlan{Hold: true, Env: env}, nil
}

// apiError wraps err with what failed, and backend.ErrUnreachable when the
// API server did not answer.
func (d *Driver) apiError(what string, err error) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne), errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err),
		apierrors.IsServerTimeout(err), apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err):
		return fmt.Errorf("kubernetes %s (namespace %s at %s): %w: %w", what, d.ns, d.host, backend.ErrUnreachable, err)
	}
	return fmt.Errorf("kubernetes %s (namespace %s at %s): %w", what, d.ns, d.host, err)
}

// refusedForDeadline reports whether err is client-go's refusal of a
// call its context's deadline would cut short, made before the deadline
// ("client rate limiter Wait returned an error: rate: Wait(n=1) would
// exceed context deadline"): the caller's time is up, though its context
// has not ended yet. Nothing but its words tells it.
func refusedForDeadline(err error) bool {
	return err != nil && strings.Contains(err.Error(), "would exceed context deadline")
}

// dnsLabel: what names a namespace, a Service, or a Lease of ours.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// dnsSubdomain: what names a pod.
func dnsSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if !dnsLabel(part) {
			return false
		}
	}
	return true
}

var (
	_ backend.Driver           = (*Driver)(nil)
	_ backend.RunLister        = (*Driver)(nil)
	_ backend.OwnershipChecker = (*Driver)(nil)
	_ backend.RunHolder        = (*Driver)(nil)
	_ backend.LapseSweeper     = (*Driver)(nil)
	_ backend.ClaimLister      = (*Driver)(nil)
	_ backend.RunCloser        = (*Driver)(nil)
)
