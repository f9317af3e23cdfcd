package kubernetes_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// These tests need the test cluster's node (kubetest.Node): their pods
// run. The names say so ("Node").

// runningPod creates, through the backend, a pod of the busybox test image
// running its server on 8080, waited for by spec's strategy, and stops it
// when the test ends.
func runningPod(t *testing.T, d *kubernetes.Driver, run string, strategy wait.Strategy) *kubernetes.Sandbox {
	t.Helper()
	img := kubetest.Busybox(t)
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	name := "rz-" + run + "-1"
	sb, err := d.Create(ctx, name, backend.Spec{Image: img, Cmd: []string{"/server"}, Ports: []string{"8080/tcp"}, RunID: run, WaitingFor: strategy})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() { _ = sb.Stop(context.Background(), time.Second) })
	return sb.(*kubernetes.Sandbox)
}

// A pod runs on the node; from outside the cluster its port is reached
// through a port-forward of the API server at Host():MappedPort, which a
// testcontainers-go strategy waited on; its logs and its end are the
// pod's.
func TestNodePodReachedThroughAPortForward(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-pf-")
	d := open(t, ns, kubernetes.DefaultLeaseSeconds)
	start := time.Now()
	sb := runningPod(t, d, "0e0f0a01", wait.ForHTTP("/").WithPort("8080/tcp").WithStartupTimeout(time.Minute))
	t.Logf("pod running and answering through its forward %s after the create", time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port, err := sb.MappedPort(ctx, "8080/tcp")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Host() != "127.0.0.1" {
		t.Errorf("Host() = %q outside the cluster, want 127.0.0.1, where the forward listens", sb.Host())
	}
	url := "http://" + sb.Host() + ":" + port + "/"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "rightsize-test-server port=8080") {
		t.Errorf("GET %s: %q, want the pod's server on its port 8080", url, body)
	}
	if again, err := sb.MappedPort(ctx, "8080"); err != nil || again != port {
		t.Errorf("MappedPort again = %q, %v; want the same forward %s", again, err, port)
	}
	if _, err := sb.MappedPort(ctx, "8080/udp"); err == nil {
		t.Error("a UDP port was forwarded: the API server forwards TCP only")
	}
	if logs, err := sb.Logs(ctx); err != nil || !strings.Contains(logs, "ready") {
		t.Errorf("Logs = %q, %v; want the server's ready line", logs, err)
	}

	if err := sb.Stop(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, sb.Name(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after Stop, pod %s: %v, want it gone", sb.Name(), err)
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("after Stop, GET %s still answered %s: the forward outlived its sandbox", url, resp.Status)
	}
}

// Exec in a pod: its code, its two streams, the wrapper's process group,
// the environment and working folder it is given, a user it cannot be
// given, and a context that ends it (SIGTERM to its group: 143).
func TestNodeExec(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-exec-")
	d := open(t, ns, kubernetes.DefaultLeaseSeconds)
	sb := runningPod(t, d, "0e0f0a02", wait.ForLog("ready"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	res, err := sb.Exec(ctx, []string{"sh", "-c", `echo out; echo err >&2; echo "$K in $(pwd)"; exit 3`}, backend.ExecOptions{Env: []string{"K=v w"}, WorkingDir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "out\nv w in /tmp\n" || string(res.Stderr) != "err\n" || res.PGID <= 1 {
		t.Errorf("exec = code %d, stdout %q, stderr %q, pgid %d; want 3, the two lines with the variable and folder, \"err\", a group", res.ExitCode, res.Stdout, res.Stderr, res.PGID)
	}
	if _, err := sb.Exec(ctx, []string{"true"}, backend.ExecOptions{User: "nobody"}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("exec as another user: %v, want ErrUnsupported", err)
	}
	in, err := sb.Exec(ctx, []string{"cat"}, backend.ExecOptions{Stdin: strings.NewReader("fed\n")})
	if err != nil || string(in.Stdout) != "fed\n" || in.ExitCode != 0 {
		t.Errorf("exec with stdin: %q, code %d, %v; want what it was fed", in.Stdout, in.ExitCode, err)
	}

	cctx, ccancel := context.WithCancel(ctx)
	time.AfterFunc(time.Second, ccancel)
	start := time.Now()
	res, err = sb.Exec(cctx, []string{"sh", "-c", "echo started; exec sleep 1000"}, backend.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted == nil || res.ExitCode != 143 || string(res.Stdout) != "started\n" {
		t.Errorf("cancelled exec = code %d, interrupted %v, stdout %q; want 143 by its lease, interrupted", res.ExitCode, res.Interrupted, res.Stdout)
	}
	t.Logf("a cancelled exec ended %v after its start", time.Since(start).Round(time.Millisecond))
	if left := sleepers(ctx, t, sb); left != "" {
		t.Errorf("after its exec was cancelled, the pod still runs %q", left)
	}
}

// sleepers lists the pod's `sleep 1000` processes.
func sleepers(ctx context.Context, t *testing.T, sb *kubernetes.Sandbox) string {
	t.Helper()
	res, err := sb.Exec(ctx, []string{"sh", "-c", `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f" 2>/dev/null; echo; done | grep '^sleep 1000' || true`}, backend.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

const envExecHelper = "RZ_KUBE_TEST_EXEC_POD"

// TestExecHelper is a process that runs a command in a pod under the
// stdin lease and blocks until it is killed.
func TestExecHelper(t *testing.T) {
	pod := os.Getenv(envExecHelper)
	if pod == "" {
		t.Skip("the helper of TestNodeExecLeaseEndsWithItsProcess")
	}
	d, err := kubernetes.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sb, err := d.Adopt(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("exec", "starting")
	_, err = sb.(backend.Execer).Exec(context.Background(), []string{"sh", "-c", "echo started; exec sleep 1000"}, backend.ExecOptions{})
	t.Fatalf("the exec ended while its process lived: %v", err)
}

// The process that runs a command in a pod is SIGKILLed: its connection
// goes, the node closes the command's stdin, and the wrapper ends the
// command's group, while the pod runs on.
func TestNodeExecLeaseEndsWithItsProcess(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-lease-")
	d := open(t, ns, kubernetes.DefaultLeaseSeconds)
	sb := runningPod(t, d, "0e0f0a03", wait.ForLog("ready"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	h := proctest.StartHelper(t, proctest.Spec{
		Name: "exec helper",
		Argv: proctest.TestArgv("TestExecHelper"),
		Env:  proctest.Environ(nil, append(env(t, ns, kubernetes.DefaultLeaseSeconds), envExecHelper+"="+sb.Name())...),
	})
	h.Expect("exec")
	proctest.WaitUntil(t, 30*time.Second, "the helper's command to run in the pod", func() bool { return sleepers(ctx, t, sb) != "" })
	h.KillAndWait()
	took := proctest.WaitUntil(t, backend.ExecGrace+30*time.Second, "the command to end with its process", func() bool { return sleepers(ctx, t, sb) == "" })
	t.Logf("SIGKILL of the exec's process → its command ended in the pod within %v", took.Round(time.Millisecond))
	if p := livePod(ctx, t, cs, ns, sb.Name()); p == nil {
		t.Error("the pod itself went with the exec's process")
	}
}

// A test process SIGKILLed while its pods run on the node: its watchdog
// deletes the run's Lease, the garbage collector the pods, and the
// kubelet ends their containers, after which the pods are gone.
func TestNodeSIGKILLOfTheOwnerEndsItsRunningPods(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-nkill-")
	img := kubetest.Busybox(t)
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	o := startOwnerWith(t, ns, kubernetes.DefaultLeaseSeconds, []string{envOwnerImage + "=" + img})
	for _, name := range o.pods {
		if p := livePod(ctx, t, cs, ns, name); p == nil || p.Status.Phase != "Running" {
			t.Fatalf("pod %s of the owner does not run: %+v", name, p)
		}
	}
	o.KillAndWait()
	killed := o.KilledAt()
	var marked, ended time.Duration
	for _, name := range o.pods {
		marked = max(marked, waitDeleted(ctx, t, cs, ns, name, killed))
	}
	for _, name := range o.pods {
		proctest.WaitUntil(t, time.Minute, "pod "+name+" ended by the kubelet and gone", func() bool {
			_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		ended = max(ended, time.Since(killed))
	}
	t.Logf("SIGKILL → every running pod of the run deleted in %v, its containers ended and the pods gone in %v", marked.Round(time.Millisecond), ended.Round(time.Millisecond))
	proctest.WaitUntil(t, time.Minute, "the watchdog ended", func() bool { return gone(o.watchdog) })
}

// A forward whose first connections the pod refuses (its server not
// listening yet) stays: a strategy, or a test, that dials until the
// server answers reaches it on the port MappedPort gave first.
func TestNodeForwardOutlivesRefusedConnections(t *testing.T) {
	t.Parallel()
	img := kubetest.Busybox(t)
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-late-")
	d := open(t, ns, kubernetes.DefaultLeaseSeconds)
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	const run = "0e0f0a04"
	sb, err := d.Create(ctx, "rz-"+run+"-1", backend.Spec{Image: img, Cmd: []string{"sh", "-c", "sleep 3; exec /server"}, Ports: []string{"8080/tcp"}, RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Stop(context.Background(), time.Second) })
	port, err := sb.MappedPort(ctx, "8080/tcp")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + sb.Host() + ":" + port + "/"
	refused := 0
	proctest.WaitUntil(t, time.Minute, "the late server to answer through the first forward", func() bool {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
		if err != nil {
			refused++
			if refused == 1 {
				t.Logf("GET %s: %v", url, err)
			}
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if refused == 0 {
		t.Errorf("the first GET through %s answered: the server was to listen 3 s late, and this test proves nothing", url)
	}
	t.Logf("%d connections refused before the server listened, then it answered on the same local port %s", refused, port)
}
