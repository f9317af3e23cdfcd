package kubernetes_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

var ranOnce atomic.Bool

// What a test calls, on a cluster with a node: Start of a pod waited for
// by a testcontainers-go strategy, its port at Endpoint (forwarded from
// outside the cluster), a command through Exec, Stop. The only test of
// this binary that starts the sandboxtest session, whose backend the
// environment names when it starts.
func TestNodeWhatATestCalls(t *testing.T) {
	if ranOnce.Swap(true) {
		t.Skip("the sandboxtest session of this process was set up by this test's first run, on a namespace deleted since: once per process")
	}
	img := kubetest.Busybox(t)
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-user-")
	t.Setenv("RIGHTSIZE_BACKEND", "kubernetes")
	t.Setenv("KUBECONFIG", os.Getenv(kubetest.EnvKubeconfig))
	t.Setenv("RIGHTSIZE_KUBE_NAMESPACE", ns)
	t.Setenv("RIGHTSIZE_CACHE_DIR", t.TempDir())

	g := sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{"/server"}, Ports: []string{"8080/tcp"}, WaitingFor: wait.ForLog("ready")})
	url := "http://" + g.Endpoint("8080/tcp") + "/"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "port=8080") {
		t.Errorf("GET %s: %q, want the pod's server", url, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := g.Exec(ctx, []string{"sh", "-c", "echo in the pod"})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "in the pod\n" {
		t.Errorf("Exec = %+v, %v; want its line", res, err)
	}
	if err := g.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}
