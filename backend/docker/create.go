package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/backend"
)

const hostGateway = "host.docker.internal:host-gateway"

var loopback = netip.MustParseAddr("127.0.0.1")

// Create creates and starts a container named name from spec.
func (d *Driver) Create(ctx context.Context, name string, spec backend.Spec) (backend.Sandbox, error) {
	return d.CreateWith(ctx, name, spec)
}

// CreateWith is Create with testcontainers-go customizers applied after
// the spec (a wait strategy, a log consumer, lifecycle hooks).
func (d *Driver) CreateWith(ctx context.Context, name string, spec backend.Spec, extra ...testcontainers.ContainerCustomizer) (*Sandbox, error) {
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:          spec.Image,
			Cmd:            spec.Cmd,
			Env:            spec.Env,
			ExposedPorts:   spec.Ports,
			Labels:         spec.Labels,
			NetworkAliases: spec.Networks,
		},
		Started: true,
	}
	for n := range spec.Networks {
		req.Networks = append(req.Networks, n)
	}
	slices.Sort(req.Networks)
	for _, f := range spec.Files {
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		req.Files = append(req.Files, testcontainers.ContainerFile{Reader: bytes.NewReader(f.Content), ContainerFilePath: f.GuestPath, FileMode: mode})
	}
	for _, c := range extra {
		if err := c.Customize(&req); err != nil {
			return nil, fmt.Errorf("create container %s: customize: %w", name, err)
		}
	}
	if spec.MemoryLimitMB > 0 {
		mem := int64(spec.MemoryLimitMB) << 20
		chainHostConfig(&req, func(hc *container.HostConfig) { hc.Memory = mem })
	}
	req.Name = name
	d.Apply(&req)
	ctr, err := testcontainers.GenericContainer(ctx, req)
	if err != nil && cerrdefs.IsConflict(err) {
		return nil, fmt.Errorf("create container %s: %w: %w", name, backend.ErrNameTaken, err)
	}
	if err != nil {
		if d.imageMissing(ctx, req.Image) {
			// Where no registry answers, the pull error alone reads like a
			// network problem.
			return nil, fmt.Errorf("create container %s: image %s is not on the engine and could not be pulled (build or load it first, or make its registry reachable): %w", name, req.Image, err)
		}
		return nil, fmt.Errorf("create container %s from %s: %w", name, spec.Image, err)
	}
	dc, _ := ctr.(*testcontainers.DockerContainer)
	return &Sandbox{d: d, name: name, id: ctr.GetContainerID(), ctr: dc}, nil
}

// Apply makes a testcontainers-go request fit rightsize: ports published on
// the loopback address of a local engine, host.docker.internal resolving to
// the host, and wait strategies that reach published ports where this
// process can. The caller sets the name and the labels.
func (d *Driver) Apply(req *testcontainers.GenericContainerRequest) {
	chainHostConfig(req, func(hc *container.HostConfig) {
		if !slices.Contains(hc.ExtraHosts, hostGateway) {
			hc.ExtraHosts = append(hc.ExtraHosts, hostGateway)
		}
		if !d.local || hc.NetworkMode.IsContainer() || hc.NetworkMode.IsHost() {
			return
		}
		ports := req.ExposedPorts
		if len(ports) == 0 {
			// testcontainers-go then publishes every port the image
			// exposes, on every interface: bind those to loopback too.
			ports = d.imagePorts(req.Image)
		}
		if hc.PortBindings == nil {
			hc.PortBindings = network.PortMap{}
		}
		for _, spec := range ports {
			pr, err := network.ParsePortRange(spec)
			if err != nil {
				continue // testcontainers-go reports it
			}
			for p := range pr.All() {
				if len(hc.PortBindings[p]) == 0 {
					hc.PortBindings[p] = []network.PortBinding{{HostIP: loopback}}
				}
			}
		}
	})
	host := d.host
	req.LifecycleHooks = append(req.LifecycleHooks, testcontainers.ContainerLifecycleHooks{
		// Runs before testcontainers-go's own readiness hook, whatever order
		// the customizers came in, so every wait strategy is covered.
		PostStarts: []testcontainers.ContainerHook{func(_ context.Context, c testcontainers.Container) error {
			if dc, ok := c.(*testcontainers.DockerContainer); ok && dc.WaitingFor != nil {
				if _, done := dc.WaitingFor.(hostFixed); !done {
					dc.WaitingFor = hostFixed{dc.WaitingFor, host}
				}
			}
			return nil
		}},
	})
}

// chainHostConfig runs fn after the request's host-config modifier, or, when
// there is none, after what testcontainers-go does without one (the
// deprecated request fields), which setting a modifier would otherwise
// turn off.
func chainHostConfig(req *testcontainers.GenericContainerRequest, fn func(*container.HostConfig)) {
	prev := req.HostConfigModifier
	req.HostConfigModifier = func(hc *container.HostConfig) {
		if prev != nil {
			prev(hc)
		} else {
			legacyHostConfig(&req.ContainerRequest, hc)
		}
		fn(hc)
	}
}

// imagePorts returns the ports image exposes, nil when it cannot tell.
func (d *Driver) imagePorts(image string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := d.cli.ImageInspect(ctx, image)
	if err != nil || res.Config == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(res.Config.ExposedPorts))
}

// legacyHostConfig applies the deprecated request fields exactly as
// testcontainers-go does when no modifier is set.
func legacyHostConfig(r *testcontainers.ContainerRequest, hc *container.HostConfig) {
	hc.AutoRemove = r.AutoRemove
	hc.CapAdd = r.CapAdd
	hc.CapDrop = r.CapDrop
	hc.Binds = r.Binds
	hc.ExtraHosts = r.ExtraHosts
	hc.NetworkMode = r.NetworkMode
	hc.Resources = r.Resources
	hc.Privileged = r.Privileged
	hc.ShmSize = r.ShmSize
}

// hostFixed runs a wait strategy against a target whose Host is the one
// rightsize publishes ports on.
type hostFixed struct {
	wait.Strategy
	host string
}

func (h hostFixed) WaitUntilReady(ctx context.Context, t wait.StrategyTarget) error {
	return h.Strategy.WaitUntilReady(ctx, hostTarget{t, h.host})
}

// Timeout keeps a wrapped strategy's timeout visible to wait.ForAll.
func (h hostFixed) Timeout() *time.Duration {
	if t, ok := h.Strategy.(wait.StrategyTimeout); ok {
		return t.Timeout()
	}
	return nil
}

type hostTarget struct {
	wait.StrategyTarget
	host string
}

func (t hostTarget) Host(context.Context) (string, error) { return t.host, nil }

// imageMissing reports whether the engine says it has no image ref.
func (d *Driver) imageMissing(ctx context.Context, ref string) bool {
	_, err := d.cli.ImageInspect(ctx, ref)
	return err != nil && isNotFound(err)
}

// Adopt returns the running container named name, or backend.ErrNotFound
// when there is none, or it is not running.
func (d *Driver) Adopt(ctx context.Context, name string) (backend.Sandbox, error) {
	res, err := d.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return nil, classify("inspect container "+name, err)
	}
	c := res.Container
	if c.State == nil || !c.State.Running {
		why := backend.ErrStopped
		if c.State != nil && (c.State.Status == container.StateCreated || c.State.Status == container.StateRestarting) {
			why = backend.ErrStarting
		}
		status := "unknown"
		if c.State != nil {
			status = string(c.State.Status)
		}
		return nil, fmt.Errorf("container %s exists but is not running (%s): %w: %w", name, status, why, backend.ErrNotFound)
	}
	return &Sandbox{d: d, name: name, id: c.ID}, nil
}

// CreateNetwork creates a bridge network.
func (d *Driver) CreateNetwork(ctx context.Context, name string, labels map[string]string) error {
	_, err := d.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels})
	if err != nil {
		return classify("create network "+name, err)
	}
	return nil
}

// Exists reports whether a container of that name exists, running or not.
func (d *Driver) Exists(ctx context.Context, name string) (bool, error) {
	_, err := d.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err == nil {
		return true, nil
	}
	if err := classify("inspect container "+name, err); errors.Is(err, backend.ErrNotFound) {
		return false, nil
	} else {
		return false, err
	}
}
