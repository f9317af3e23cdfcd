package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// target is a running pod as testcontainers-go's wait strategies see a
// container, so that Spec.WaitingFor (wait.ForLog, wait.ForListeningPort,
// wait.ForHTTP, wait.ForExec…) waits for a pod as it would for a
// container: its logs, its ports (forwarded from outside the cluster), its
// state from the pod's status, and commands through Exec.
//
// A call the cluster does not allow (ErrForbidden) will not be allowed on
// the strategy's next try either: its State then says so, and the
// strategies, which look at the state between tries, end at once with it
// instead of at their timeout.
type target struct {
	s *Sandbox

	mu     sync.Mutex
	denied error
}

var _ wait.StrategyTarget = (*target)(nil)

// deny keeps err when it is a refusal, and returns it.
func (t *target) deny(err error) error {
	if errors.Is(err, ErrForbidden) {
		t.mu.Lock()
		if t.denied == nil {
			t.denied = err
		}
		t.mu.Unlock()
	}
	return err
}

func (t *target) Host(context.Context) (string, error) {
	if h := t.s.Host(); h != "" {
		return h, nil
	}
	return "", fmt.Errorf("kubernetes: pod %s/%s has no address yet", t.s.d.ns, t.s.name)
}

// Inspect says the pod's state and its spec's ports, each bound where this
// process reaches it (Ports): what a strategy that looks for the ports to
// wait on reads.
func (t *target) Inspect(ctx context.Context) (*container.InspectResponse, error) {
	st, err := t.State(ctx)
	if err != nil {
		return nil, err
	}
	ports, err := t.Ports(ctx)
	if err != nil {
		return nil, err
	}
	return &container.InspectResponse{ID: t.s.name, Name: t.s.name, State: st, NetworkSettings: &container.NetworkSettings{Ports: ports}}, nil
}

// Ports binds each of the spec's ports where this process reaches it:
// Host and MappedPort (a forward of 127.0.0.1 outside the cluster). A
// port that cannot be reached from here (UDP, outside) is listed unbound.
func (t *target) Ports(ctx context.Context) (network.PortMap, error) {
	pm := network.PortMap{}
	if t.s.spec == nil {
		return pm, nil
	}
	host, _ := netip.ParseAddr(t.s.Host())
	for _, p := range t.s.spec.Ports {
		if !strings.Contains(p, "/") {
			p += "/tcp"
		}
		port, err := network.ParsePort(strings.ToLower(p))
		if err != nil {
			return nil, fmt.Errorf("kubernetes: port %q: %w", p, err)
		}
		pm[port] = nil
		mapped, err := t.s.MappedPort(ctx, p)
		if errors.Is(t.deny(err), ErrForbidden) {
			return nil, err
		}
		if err == nil && host.IsValid() {
			pm[port] = []network.PortBinding{{HostIP: host, HostPort: mapped}}
		}
	}
	return pm, nil
}

func (t *target) MappedPort(ctx context.Context, port string) (network.Port, error) {
	local, err := t.s.MappedPort(ctx, port)
	if err != nil {
		return network.Port{}, t.deny(err)
	}
	return network.ParsePort(local + "/tcp")
}

func (t *target) Logs(ctx context.Context) (io.ReadCloser, error) {
	l, err := t.s.Logs(ctx)
	if err != nil {
		return nil, t.deny(err)
	}
	return io.NopCloser(strings.NewReader(l)), nil
}

// Exec runs cmd under the lease, and returns its code and its output,
// stdout then stderr (a strategy reads them as one stream). A pod with no
// shell or setsid answers as a container without the program would (126,
// 127), which strategies that probe from inside take as "cannot check
// from inside" rather than a failure.
func (t *target) Exec(ctx context.Context, cmd []string, _ ...tcexec.ProcessOption) (int, io.Reader, error) {
	res, err := t.s.Exec(ctx, cmd, backend.ExecOptions{})
	switch {
	case errors.Is(err, backend.ErrNoShell):
		return 127, strings.NewReader(err.Error()), nil
	case errors.Is(err, backend.ErrNoSetsid):
		return 126, strings.NewReader(err.Error()), nil
	case err != nil:
		return -1, nil, t.deny(err)
	}
	return res.ExitCode, io.MultiReader(bytes.NewReader(res.Stdout), bytes.NewReader(res.Stderr)), nil
}

// State is the pod's container's state as a container's: running, or
// exited with its code (OOMKilled said), or created while it waits.
func (t *target) State(ctx context.Context) (*container.State, error) {
	t.mu.Lock()
	denied := t.denied
	t.mu.Unlock()
	if denied != nil {
		return nil, denied
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	p, err := t.s.d.cs.CoreV1().Pods(t.s.d.ns).Get(cctx, t.s.name, metav1.GetOptions{})
	if err != nil {
		return nil, t.s.d.apiError("get pod "+t.s.name, err)
	}
	return containerState(p), nil
}

func containerState(p *corev1.Pod) *container.State {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != containerName {
			continue
		}
		switch {
		case cs.State.Running != nil:
			return &container.State{Status: container.StateRunning, Running: true, StartedAt: cs.State.Running.StartedAt.UTC().Format(time.RFC3339Nano)}
		case cs.State.Terminated != nil:
			tm := cs.State.Terminated
			return &container.State{Status: container.StateExited, ExitCode: int(tm.ExitCode), OOMKilled: tm.Reason == "OOMKilled", Error: tm.Message}
		}
	}
	return &container.State{Status: container.StateCreated}
}

// copyLimit bounds what CopyFileFromContainer reads: a strategy reads a
// small file (a ready marker, a pid file).
const copyLimit = 16 << 20

func (t *target) CopyFileFromContainer(ctx context.Context, path string) (io.ReadCloser, error) {
	res, err := t.s.Exec(ctx, []string{"cat", "--", path}, backend.ExecOptions{OutputLimit: copyLimit})
	switch {
	case err != nil:
		return nil, t.deny(err)
	case res.ExitCode != 0:
		return nil, fmt.Errorf("kubernetes: copy %s from pod %s/%s: cat exited %d: %s", path, t.s.d.ns, t.s.name, res.ExitCode, bytes.TrimSpace(res.Stderr))
	case res.StdoutTruncated:
		return nil, fmt.Errorf("kubernetes: copy %s from pod %s/%s: larger than %d bytes", path, t.s.d.ns, t.s.name, copyLimit)
	}
	return io.NopCloser(bytes.NewReader(res.Stdout)), nil
}
