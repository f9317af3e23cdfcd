package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// LabelReuseExtra is rightsize-go's mark of what the family's keep-alive
// identity cannot see (backend.Spec.KeepAliveExtra).
const LabelReuseExtra = backend.LabelReuseExtra

var _ backend.KeepAliver = (*Driver)(nil)

// Describe says what the container is: its image and the image's id, its
// keep-alive marks, when it was created, whether it runs.
func (s *Sandbox) Describe(ctx context.Context) (backend.Description, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	res, err := s.d.cli.ContainerInspect(ctx, s.ref(), client.ContainerInspectOptions{})
	if err != nil {
		return backend.Description{}, classify("inspect container "+s.name, err)
	}
	c := res.Container
	d := backend.Description{Name: trimSlash(c.Name), ImageID: c.Image}
	if c.Config != nil {
		d.Image = c.Config.Image
		d.KeepAlive = c.Config.Labels[LabelReuse]
		d.KeepAliveExtra = c.Config.Labels[LabelReuseExtra]
		d.Test, d.TestPlace = c.Config.Labels[backend.LabelTest], c.Config.Labels[backend.LabelTestPlace]
	}
	if t, err := time.Parse(time.RFC3339Nano, c.Created); err == nil {
		d.Created = t
	}
	d.Running = c.State != nil && c.State.Running
	return d, nil
}

// ImageID is the id of the image ref names on the engine now.
func (d *Driver) ImageID(ctx context.Context, ref string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	res, err := d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return "", classify("inspect image "+ref, err)
	}
	return res.ID, nil
}

// KeepAlives describes every container carrying the keep-alive label,
// running or not.
func (d *Driver) KeepAlives(ctx context.Context) ([]backend.Description, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	cl, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelReuse)})
	if err != nil {
		return nil, classify("list keep-alive containers", err)
	}
	var out []backend.Description
	for _, c := range cl.Items {
		name := c.ID
		if len(c.Names) > 0 {
			name = trimSlash(c.Names[0])
		}
		out = append(out, backend.Description{
			Name: name, Image: c.Image, ImageID: c.ImageID,
			KeepAlive: c.Labels[LabelReuse], KeepAliveExtra: c.Labels[LabelReuseExtra],
			Test: c.Labels[backend.LabelTest], TestPlace: c.Labels[backend.LabelTestPlace],
			Created: time.Unix(c.Created, 0), Running: strings.EqualFold(string(c.State), "running"),
		})
	}
	return out, nil
}

// RemoveKeepAlive removes the keep-alive container name when its
// keep-alive label is keepAlive (any, when keepAlive is empty): by the id
// the lookup gave, so a name that changed hands is never removed.
func (d *Driver) RemoveKeepAlive(ctx context.Context, name, keepAlive string) error {
	ictx, cancel := context.WithTimeout(ctx, CallTimeout)
	res, err := d.cli.ContainerInspect(ictx, name, client.ContainerInspectOptions{})
	cancel()
	if err != nil {
		return classify("inspect container "+name, err)
	}
	var mark string
	var has bool
	if res.Container.Config != nil {
		mark, has = res.Container.Config.Labels[LabelReuse]
	}
	if !has || (keepAlive != "" && mark != keepAlive) {
		return fmt.Errorf("container %s: %w: it is not the keep-alive sandbox %s (its %s label is %q)", name, backend.ErrNotOwned, keepAlive, LabelReuse, mark)
	}
	return d.removeID(ctx, backend.SandboxKind, res.Container.ID, name)
}
