package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// Sandbox is a container created or adopted by the Driver.
type Sandbox struct {
	d    *Driver
	name string

	mu  sync.Mutex
	id  string
	ctr *testcontainers.DockerContainer
}

var _ backend.Container = (*Sandbox)(nil)

// SandboxFor returns a handle on the container named name (which may not
// exist), for stopping or inspecting it by name.
func (d *Driver) SandboxFor(name string) *Sandbox { return &Sandbox{d: d, name: name} }

// Name is the container's name.
func (s *Sandbox) Name() string { return s.name }

// ID is the container id ("" until the engine created it, and for a handle
// made by name).
func (s *Sandbox) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

func (s *Sandbox) setID(id string) {
	s.mu.Lock()
	s.id = id
	s.mu.Unlock()
}

func (s *Sandbox) setContainer(c *testcontainers.DockerContainer) {
	s.mu.Lock()
	s.ctr = c
	s.mu.Unlock()
}

// ref is how the engine is asked about the container: by id once known
// (a name can change hands), else by name.
func (s *Sandbox) ref() string {
	if id := s.ID(); id != "" {
		return id
	}
	return s.name
}

// Host is where published ports are reached.
func (s *Sandbox) Host() string { return s.d.net().host }

// Container is the testcontainers-go container, for everything rightsize
// does not wrap. For a container this process did not create (an adopted
// keep-alive one), it is a handle made for the occasion on the same
// engine; its Terminate removes the container like any other.
func (s *Sandbox) Container() testcontainers.Container {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctr != nil {
		return s.ctr
	}
	if s.id == "" {
		return nil
	}
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil
	}
	_ = p.Close()
	p.SetClient(s.d.cli)
	dc := &testcontainers.DockerContainer{ID: s.id}
	dc.SetProvider(p)
	if res, err := s.d.cli.ContainerInspect(context.Background(), s.id, client.ContainerInspectOptions{}); err == nil && res.Container.Config != nil {
		dc.Image = res.Container.Config.Image
	}
	s.ctr = dc
	return dc
}

// Driver is the driver the sandbox belongs to.
func (s *Sandbox) Driver() *Driver { return s.d }

// MappedPort returns the host port guest port ("8080/tcp" or "8080") is
// published on.
func (s *Sandbox) MappedPort(ctx context.Context, port string) (string, error) {
	want, err := network.ParsePort(port)
	if err != nil {
		return "", fmt.Errorf("port %q: %w", port, err)
	}
	res, err := s.d.cli.ContainerInspect(ctx, s.ref(), client.ContainerInspectOptions{})
	if err != nil {
		return "", classify("inspect container "+s.name, err)
	}
	if res.Container.NetworkSettings != nil {
		for p, bs := range res.Container.NetworkSettings.Ports {
			if p.Num() != want.Num() || (!strings.Contains(port, "/") && p.Proto() != "tcp") || (strings.Contains(port, "/") && p.Proto() != want.Proto()) {
				continue
			}
			// An engine may publish one port on IPv4 and IPv6 (Podman lists
			// the IPv6 binding first): the host this process dials is IPv4
			// or a name, so an IPv4 or unspecified binding wins.
			var v6 string
			for _, b := range bs {
				switch {
				case b.HostPort == "":
				case b.HostIP.IsValid() && b.HostIP.Is6() && !b.HostIP.Is4In6():
					if v6 == "" {
						v6 = b.HostPort
					}
				default:
					return b.HostPort, nil
				}
			}
			if v6 != "" {
				return v6, nil
			}
		}
	}
	return "", fmt.Errorf("container %s publishes no port %s (publish it in the spec's Ports)", s.name, port)
}

// Logs returns everything the container wrote so far, stdout then stderr
// interleaved as the engine stored them.
func (s *Sandbox) Logs(ctx context.Context) (string, error) {
	rc, err := s.d.cli.ContainerLogs(ctx, s.ref(), client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", classify("logs of container "+s.name, err)
	}
	defer rc.Close()
	var b strings.Builder
	if _, err := stdcopy.StdCopy(&b, &b, rc); err != nil && !errors.Is(err, io.EOF) {
		return b.String(), fmt.Errorf("logs of container %s: %w", s.name, err)
	}
	return b.String(), nil
}

// Stop sends SIGTERM, waits at most grace for the container to exit, then
// removes it by force. nil means the container is confirmed gone.
func (s *Sandbox) Stop(ctx context.Context, grace time.Duration) error {
	return s.d.Stop(ctx, s.ref(), grace)
}

// Stop stops and removes the container named name: SIGTERM, at most grace
// (to the millisecond: the engine's own stop timeout counts whole seconds
// and defaults to 10), then a forced removal. A PID 1 that ignores SIGTERM,
// like busybox sleep, costs grace and no more. nil means confirmed gone.
func (d *Driver) Stop(ctx context.Context, name string, grace time.Duration) error {
	_, err := d.cli.ContainerKill(ctx, name, client.ContainerKillOptions{Signal: "SIGTERM"})
	if err != nil && notFound.says(err) {
		return nil
	}
	if err == nil && grace > 0 {
		wctx, cancel := context.WithTimeout(ctx, grace)
		res := d.cli.ContainerWait(wctx, name, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case <-res.Result:
		case <-res.Error:
		}
		cancel()
	}
	if err := d.removeID(ctx, backend.SandboxKind, name, name); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return err
	}
	return nil
}
