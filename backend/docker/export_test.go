package docker

import (
	"context"
	"errors"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/backend"
)

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

// ForceRemove removes a test's own container by name, whatever it is.
func (d *Driver) ForceRemove(ctx context.Context, name string) {
	_, _ = d.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
}

// ForceRemoveNetwork removes a test's own network by name.
func (d *Driver) ForceRemoveNetwork(ctx context.Context, name string) {
	_, _ = d.cli.NetworkRemove(ctx, name, client.NetworkRemoveOptions{})
}

// Reach is where the driver binds and reaches published ports, and why.
func (d *Driver) Reach() (host, bind, why string) {
	r := d.net()
	return r.host, r.bind.String(), r.why
}

// IsPodman reports whether the engine says it is Podman.
func (d *Driver) IsPodman() bool { return d.isPodman() }

// StartGuard starts the guard of every create in front of the engine at
// upstream, its socket under dir, without pointing the process at it: it
// returns the proxy's address and what stops it.
func StartGuard(ctx context.Context, upstream, dir string, h backend.GuardHook) (addr string, stop func() error, err error) {
	g, err := newAllGuard(ctx, upstream, dir, h)
	if err != nil {
		return "", nil, err
	}
	return g.px.Addr(), g.Close, nil
}
