package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/backend"
)

// RunResources lists the containers and networks labelled with run id,
// under either spelling of the run label.
func (d *Driver) RunResources(ctx context.Context, runID string) (containers, networks []string, err error) {
	for _, label := range []string{LabelRunID, LabelRunIDAlt} {
		f := client.Filters{}.Add("label", label+"="+runID)
		cl, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			return nil, nil, classify("list containers", err)
		}
		for _, c := range cl.Items {
			n := c.ID
			if len(c.Names) > 0 {
				n = trimSlash(c.Names[0])
			}
			if !slices.Contains(containers, n) {
				containers = append(containers, n)
			}
		}
		nl, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
		if err != nil {
			return nil, nil, classify("list networks", err)
		}
		for _, n := range nl.Items {
			if !slices.Contains(networks, n.Name) {
				networks = append(networks, n.Name)
			}
		}
	}
	slices.Sort(containers)
	slices.Sort(networks)
	return containers, networks, nil
}

// CloseRun removes every container, then every network, labelled with run
// id (either spelling), whether or not the ledger lists them: what a
// TestMain calls on its way out. It returns what it removed.
func (d *Driver) CloseRun(ctx context.Context, runID string) (removed []string, err error) {
	containers, networks, err := d.RunResources(ctx, runID)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i, e := range d.RemoveSandboxes(ctx, containers) {
		if e == nil {
			removed = append(removed, "container "+containers[i])
		} else if !errors.Is(e, backend.ErrNotFound) {
			errs = append(errs, e)
		}
	}
	for i, e := range d.RemoveNetworks(ctx, networks) {
		if e == nil {
			removed = append(removed, "network "+networks[i])
		} else if !errors.Is(e, backend.ErrNotFound) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("close run %s: %w", runID, errors.Join(errs...))
	}
	return removed, nil
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}
