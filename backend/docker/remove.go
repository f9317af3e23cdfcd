package docker

import (
	"context"
	"errors"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// removeParallel is how many removals run at once. The engine spends its
// time per container whatever the parallelism; a few at once hide the
// round trips.
const removeParallel = 4

// RemoveSandboxes force-removes the named containers (and their anonymous
// volumes): nil when gone, backend.ErrNotFound when there was none.
func (d *Driver) RemoveSandboxes(ctx context.Context, names []string) []error {
	return forEach(names, func(n string) error {
		_, err := d.cli.ContainerRemove(ctx, n, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		return classify("remove container "+n, err)
	})
}

// RemoveNetworks removes the named networks: nil, backend.ErrNotFound, or
// backend.ErrInUse while containers are attached.
func (d *Driver) RemoveNetworks(ctx context.Context, names []string) []error {
	return forEach(names, func(n string) error {
		_, err := d.cli.NetworkRemove(ctx, n, client.NetworkRemoveOptions{})
		return classify("remove network "+n, err)
	})
}

func forEach(names []string, fn func(string) error) []error {
	errs := make([]error, len(names))
	sem := make(chan struct{}, removeParallel)
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(n)
		}()
	}
	wg.Wait()
	return errs
}

func isNotFound(err error) bool {
	if cerrdefs.IsNotFound(err) {
		return true
	}
	// Older engines answer some removals with a 500 and a message only.
	var msg string
	for e := err; e != nil; e = errors.Unwrap(e) {
		msg = e.Error()
	}
	return strings.Contains(msg, "No such container") || strings.Contains(msg, "No such network")
}
