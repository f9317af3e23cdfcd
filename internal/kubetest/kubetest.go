package kubetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rightsize/rightsize-go/internal/proctest"
)

// EnvKubeconfig names the test cluster's kubeconfig.
const EnvKubeconfig = "RIGHTSIZE_TEST_KUBECONFIG"

// How long Config waits for /readyz, and how long each call may take. The
// gate has waited for the cluster before the tests start, so a cluster that
// is not ready within readyTimeout is broken, not slow.
var (
	readyTimeout = 15 * time.Second
	callTimeout  = 30 * time.Second
)

// Config returns the REST configuration of the cluster EnvKubeconfig names,
// once its /readyz says ok. It skips t when EnvKubeconfig is unset or
// empty, and fails it when the kubeconfig cannot be loaded or the cluster
// is not ready within 15 s.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	path := os.Getenv(EnvKubeconfig)
	if path == "" {
		t.Skipf("%s is not set: no Kubernetes test cluster (`make kube` starts one and prints its kubeconfig; the Kubernetes gate of `make test` runs these tests against one)", EnvKubeconfig)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("%s=%s: %v", EnvKubeconfig, path, err)
	}
	cfg.Timeout = callTimeout
	// client-go's default of 5 requests a second would pace every poll
	// of a test at 200 ms and log each wait.
	cfg.QPS, cfg.Burst = 100, 200
	if err := waitReady(cfg); err != nil {
		t.Fatalf("%s=%s: the cluster at %s is not ready: %v", EnvKubeconfig, path, cfg.Host, err)
	}
	return cfg
}

// waitReady polls /readyz until it says ok or readyTimeout passes. Each
// ask has a bound of its own, so that the last one, after the deadline,
// still brings the cluster's own answer.
func waitReady(cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if !proctest.Poll(readyTimeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var body []byte
		body, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) != "ok" {
			err = fmt.Errorf("/readyz says %q", body)
		}
		return err == nil
	}) {
		return fmt.Errorf("no ok from /readyz within %v: %w", readyTimeout, err)
	}
	return nil
}

// Client returns a clientset for the test cluster, by Config's rules.
func Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(Config(t))
	if err != nil {
		t.Fatalf("client for the test cluster: %v", err)
	}
	return cs
}

// Namespace creates a namespace of a fresh name (the apiserver picks it
// from prefix), waits until its `default` ServiceAccount is there (the
// apiserver admits no pod before, and the cluster's service-account
// controller makes it), and deletes the namespace when t ends, waiting up to
// a minute until the namespace controller has removed it and all it holds.
func Namespace(t testing.TB, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a namespace: %v", err)
	}
	t.Cleanup(func() { deleteNamespace(t, cs, ns.Name) })
	if err := WaitThere(ctx, cs.CoreV1().ServiceAccounts(ns.Name).Get, "default"); err != nil {
		t.Fatalf("namespace %s: its default ServiceAccount (the service-account controller's): %v", ns.Name, err)
	}
	return ns.Name
}

func deleteNamespace(t testing.TB, cs kubernetes.Interface, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", name, err)
		return
	}
	if err := WaitGone(ctx, cs.CoreV1().Namespaces().Get, name); err != nil {
		t.Errorf("namespace %s, deleted: %v", name, err)
	}
}

// Getter is the Get of a typed client (cs.CoreV1().Pods(ns).Get, …).
type Getter[T any] func(context.Context, string, metav1.GetOptions) (T, error)

// WaitGone polls get(name) until the apiserver says NotFound, another error,
// or ctx ends.
func WaitGone[T any](ctx context.Context, get Getter[T], name string) error {
	return waitGet(ctx, get, name, true)
}

// WaitThere polls get(name) until the object is there, an error other than
// NotFound, or ctx ends.
func WaitThere[T any](ctx context.Context, get Getter[T], name string) error {
	return waitGet(ctx, get, name, false)
}

func waitGet[T any](ctx context.Context, get Getter[T], name string, gone bool) error {
	// The last ask goes out a second before ctx ends, so that its answer,
	// not ctx's error, says why the wait failed.
	within := callTimeout
	if d, ok := ctx.Deadline(); ok {
		within = max(time.Until(d)-time.Second, 0)
	}
	var err error
	held := proctest.Poll(within, func() bool {
		_, err = get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return true
		}
		return apierrors.IsNotFound(err) == gone
	})
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("get %s: %w", name, err)
	case !held && gone:
		return fmt.Errorf("%s is still there after %v", name, within.Round(time.Second))
	case !held:
		return fmt.Errorf("%s is not there after %v", name, within.Round(time.Second))
	}
	return nil
}
