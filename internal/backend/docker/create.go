package docker

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/origin"
)

const hostGateway = "host.docker.internal:host-gateway"

// Labels of testcontainers-go's reaper, Ryuk. A keep-alive container must
// not carry them: Ryuk would remove it once the test session ends.
const (
	tcLabelReap    = "org.testcontainers.reap"
	tcLabelSession = "org.testcontainers.sessionId"
)

// Create creates and starts a container named name from spec.
func (d *Driver) Create(ctx context.Context, name string, spec backend.Spec) (backend.Sandbox, error) {
	sbx, err := d.create(ctx, name, spec)
	if err != nil {
		return nil, err // not a nil *Sandbox in a non-nil interface
	}
	return sbx, nil
}

func (d *Driver) create(ctx context.Context, name string, spec backend.Spec) (*Sandbox, error) {
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:          spec.Image,
			Cmd:            spec.Cmd,
			Env:            spec.Env,
			ExposedPorts:   spec.Ports,
			Labels:         maps.Clone(spec.Labels),
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
	if spec.WaitingFor != nil {
		req.WaitingFor = spec.WaitingFor
	}
	for _, c := range spec.Customize {
		if err := c.Customize(&req); err != nil {
			return nil, fmt.Errorf("create container %s: customize: %w", name, err)
		}
	}
	if len(spec.Volumes) > 0 {
		mounts := make([]mount.Mount, 0, len(spec.Volumes))
		for _, v := range spec.Volumes {
			mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: v.Name, Target: v.Path, ReadOnly: v.ReadOnly})
		}
		chainHostConfig(&req, func(hc *container.HostConfig) { hc.Mounts = append(hc.Mounts, mounts...) })
	}
	if spec.MemoryLimitMB > 0 {
		mem := int64(spec.MemoryLimitMB) << 20
		chainHostConfig(&req, func(hc *container.HostConfig) { hc.Memory = mem })
	}
	req.Name = name
	req.Labels = origin.FromContext(ctx).AddLabels(req.Labels)
	if req.Labels == nil {
		req.Labels = map[string]string{}
	}
	for k, v := range map[string]string{backend.LabelTest: spec.Test, backend.LabelTestPlace: spec.TestPlace} {
		if v != "" {
			req.Labels[k] = v
		}
	}
	if spec.KeepAlive != "" {
		req.Labels[LabelReuse] = spec.KeepAlive
		if spec.KeepAliveExtra != "" {
			req.Labels[LabelReuseExtra] = spec.KeepAliveExtra
		}
		delete(req.Labels, LabelRunID)
		delete(req.Labels, LabelRunIDAlt)
		keepFromRyuk(&req)
	} else {
		maps.Copy(req.Labels, d.RunLabels(spec.RunID))
	}
	d.apply(&req)
	ctr, err := testcontainers.GenericContainer(ctx, req)
	if err != nil && nameTaken.says(err) {
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

// runLabels are the labels of run id's ordinary containers and networks.
func runLabels(runID string) map[string]string {
	return map[string]string{LabelRunID: runID, LabelRunIDAlt: runID}
}

// keepFromRyuk takes testcontainers-go's reaper labels off the container
// once testcontainers-go has put them on (its config modifier runs after
// the labels are set): Ryuk removes what carries its session's labels when
// the session ends, which a keep-alive container must outlive.
func keepFromRyuk(req *testcontainers.GenericContainerRequest) {
	prev := req.ConfigModifier
	req.ConfigModifier = func(c *container.Config) {
		if prev != nil {
			prev(c)
		}
		delete(c.Labels, tcLabelReap)
		delete(c.Labels, tcLabelSession)
	}
}

// Track takes a testcontainers-go request that its caller will create as
// run runID's sandbox name, made by o: named and labelled, its ports
// published where this process reaches them. The handle it returns learns
// the container's id once the engine has created it.
func (d *Driver) Track(req *testcontainers.GenericContainerRequest, name, runID string, o origin.Origin) (backend.Sandbox, error) {
	req.Name = name
	req.Labels = o.AddLabels(req.Labels)
	if req.Labels == nil {
		req.Labels = map[string]string{}
	}
	maps.Copy(req.Labels, d.RunLabels(runID))
	d.apply(req)
	s := &Sandbox{d: d, name: name}
	req.LifecycleHooks = append(req.LifecycleHooks, testcontainers.ContainerLifecycleHooks{
		PostCreates: []testcontainers.ContainerHook{func(_ context.Context, c testcontainers.Container) error {
			s.setID(c.GetContainerID())
			if dc, ok := c.(*testcontainers.DockerContainer); ok {
				s.setContainer(dc)
			}
			return nil
		}},
	})
	return s, nil
}

// apply makes a testcontainers-go request fit rightsize: ports published
// where this process reaches them (loopback only beside a local engine),
// host.docker.internal resolving to the host, and wait strategies that
// reach published ports where this process can.
func (d *Driver) apply(req *testcontainers.GenericContainerRequest) {
	bind := d.net().bind
	chainHostConfig(req, func(hc *container.HostConfig) {
		if !slices.Contains(hc.ExtraHosts, hostGateway) {
			hc.ExtraHosts = append(hc.ExtraHosts, hostGateway)
		}
		if !bind.IsValid() || hc.NetworkMode.IsContainer() || hc.NetworkMode.IsHost() {
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
					hc.PortBindings[p] = []network.PortBinding{{HostIP: bind}}
				}
			}
		}
	})
	host := d.net().host
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

// String keeps the wrapped strategy's description for testcontainers-go's
// "Waiting for" log line.
func (h hostFixed) String() string {
	if s, ok := h.Strategy.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", h.Strategy)
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
	return err != nil && notFound.says(err)
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

// CreateVolume creates the named volume name, labelled as run runID's
// (with the origin ctx carries), on the engine's default driver.
func (d *Driver) CreateVolume(ctx context.Context, name, runID string) (string, error) {
	marks := d.RunLabels(runID)
	res, err := d.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: origin.FromContext(ctx).AddLabels(maps.Clone(marks))})
	if err != nil {
		return "", classify("create volume "+name, err)
	}
	// The engine answers a create of a name it has with that volume, as
	// it is: one without the run's marks is someone else's.
	for k, v := range marks {
		if res.Volume.Labels[k] != v {
			return "", fmt.Errorf("create volume %s: %w: the engine has a volume of that name that is not run %s's", name, backend.ErrNameTaken, runID)
		}
	}
	return res.Volume.Name, nil
}

// CreateNetwork creates a bridge network labelled as run runID's, and
// with the origin ctx carries.
func (d *Driver) CreateNetwork(ctx context.Context, name, runID string) (string, error) {
	labels := origin.FromContext(ctx).AddLabels(d.RunLabels(runID))
	res, err := d.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels})
	if err != nil {
		return "", classify("create network "+name, err)
	}
	return res.ID, nil
}
