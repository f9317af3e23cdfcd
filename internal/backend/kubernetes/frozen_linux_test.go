package kubernetes_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/kubetest"
)

// relay carries TCP connections to the test cluster's API server, and can
// be frozen: it then accepts connections and carries no byte either way,
// as a stopped (SIGSTOP) or hung API server looks to its clients, whose
// connections the kernel still accepts. It stands in for freezing the
// test cluster's own API server, which every other test of the gate uses.
type relay struct {
	ln   net.Listener
	to   string
	mu   sync.Mutex
	thaw chan struct{} // nil while not frozen; closed by unfreeze
	open []net.Conn
}

// newRelay relays to the test cluster's API server, and returns a
// kubeconfig of that cluster through it.
func newRelay(t *testing.T) (*relay, string) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(os.Getenv(kubetest.EnvKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		r.to = u.Host
		u.Host = ln.Addr().String()
		c.Server = u.String()
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	go r.serve()
	t.Cleanup(r.close)
	return r, path
}

func (r *relay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.open = append(r.open, c)
		r.mu.Unlock()
		go func() {
			r.wait()
			up, err := net.Dial("tcp", r.to)
			if err != nil {
				c.Close()
				return
			}
			r.mu.Lock()
			r.open = append(r.open, up)
			r.mu.Unlock()
			go r.copy(up, c)
			r.copy(c, up)
		}()
	}
}

// copy carries src to dst, holding what it read while the relay is frozen.
func (r *relay) copy(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wait returns once the relay is not frozen.
func (r *relay) wait() {
	r.mu.Lock()
	thaw := r.thaw
	r.mu.Unlock()
	if thaw != nil {
		<-thaw
	}
}

func (r *relay) freeze() {
	r.mu.Lock()
	if r.thaw == nil {
		r.thaw = make(chan struct{})
	}
	r.mu.Unlock()
}

func (r *relay) unfreeze() {
	r.mu.Lock()
	if r.thaw != nil {
		close(r.thaw)
		r.thaw = nil
	}
	r.mu.Unlock()
}

func (r *relay) close() {
	r.unfreeze()
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.open {
		c.Close()
	}
}

// An Exec with no deadline of its own, while the API server does not
// answer, returns once its bound on the command's start has passed,
// saying the API server did not answer, as a Docker exec does when its
// engine does not.
func TestNodeExecIsBoundedWhileTheAPIServerIsFrozen(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-frozen-")
	d := open(t, ns, kubernetes.DefaultLeaseSeconds)
	sb := runningPod(t, d, "0e0f0a07", wait.ForLog("ready").WithStartupTimeout(time.Minute))

	r, kc := newRelay(t)
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	far, err := kubernetes.OpenEnv(ctx, map[string]string{"KUBECONFIG": kc, kubernetes.EnvNamespace: ns})
	if err != nil {
		t.Fatalf("open through the relay: %v", err)
	}
	defer far.Close()
	const bound = 3 * time.Second
	far.SetExecStart(bound)
	adopted, err := far.Adopt(ctx, sb.Name())
	if err != nil {
		t.Fatalf("adopt through the relay: %v", err)
	}
	ex := adopted.(backend.Execer)
	if res, err := ex.Exec(ctx, []string{"true"}, backend.ExecOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec through the relay before the freeze: %+v, %v", res, err)
	}

	r.freeze()
	defer r.unfreeze()
	type result struct {
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		_, err := ex.Exec(context.Background(), []string{"echo", "hi"}, backend.ExecOptions{})
		done <- result{err, time.Since(start)}
	}()
	select {
	case got := <-done:
		if !errors.Is(got.err, backend.ErrUnreachable) {
			t.Fatalf("Exec while the API server is frozen: %v, want ErrUnreachable", got.err)
		}
		t.Logf("returned after %s (bound %s): %v", got.took.Round(time.Millisecond), bound, got.err)
	case <-time.After(2 * time.Minute):
		t.Fatalf("Exec(context.Background()) has not returned 2 min into a frozen API server (its bound: %s)", bound)
	}
}
