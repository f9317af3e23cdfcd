package msb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rightsize/rightsize-go/internal/backend"
)

var _ backend.KeepAliver = (*Driver)(nil)

// ImageID is not known on msb: it keeps no image ids the family reads.
func (d *Driver) ImageID(ctx context.Context, ref string) (string, error) {
	return "", fmt.Errorf("msb backend: the id of image %s: %w", ref, errors.ErrUnsupported)
}

// KeepAlives lists the sandboxes msb knows whose name is a keep-alive one:
// msb keeps no labels, so the name is the only mark.
func (d *Driver) KeepAlives(ctx context.Context) ([]backend.Description, error) {
	all, err := d.list(ctx)
	if err != nil {
		return nil, err
	}
	var out []backend.Description
	for name, status := range all {
		if h, ok := strings.CutPrefix(name, backend.KeepAlivePrefix); ok {
			out = append(out, backend.Description{Name: name, KeepAlive: h, Running: status == statusRunning})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveKeepAlive removes the keep-alive sandbox name, which must be named
// as one (rz-reuse-<keepAlive>) and, when it carries labels, be labelled
// as that one (dev.rightsize.reuse=<keepAlive>), not as a run's. One with
// no label at all (the other members' make none) is removed by its name.
func (d *Driver) RemoveKeepAlive(ctx context.Context, name, keepAlive string) error {
	h, ok := strings.CutPrefix(name, backend.KeepAlivePrefix)
	if !ok || (keepAlive != "" && h != keepAlive) {
		return fmt.Errorf("msb sandbox %s: %w: not the keep-alive sandbox %s", name, backend.ErrNotOwned, keepAlive)
	}
	if err := checkName(name); err != nil {
		return err
	}
	info, err := d.inspect(ctx, name)
	if err != nil {
		return err
	}
	mark, marked := info.labels[backend.LabelReuse]
	_, runA := info.labels[backend.LabelRunID]
	_, runB := info.labels[backend.LabelRunIDAlt]
	switch {
	case marked && keepAlive != "" && mark != keepAlive:
		return fmt.Errorf("msb sandbox %s: %w: it is not the keep-alive sandbox %s (its %s label is %q)", name, backend.ErrNotOwned, keepAlive, backend.LabelReuse, mark)
	case !marked && (runA || runB):
		return fmt.Errorf("msb sandbox %s: %w: it is labelled as a run's, not as a keep-alive sandbox", name, backend.ErrNotOwned)
	}
	return d.remove(ctx, name)
}
