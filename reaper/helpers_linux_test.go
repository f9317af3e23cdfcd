//go:build linux

package reaper_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// startContainers starts n containers at once and returns their names.
func startContainers(t testing.TB, d *docker.Driver, kind string, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = uniqueName(t, kind)
		t.Cleanup(func() { removeContainer(t, d, names[i]) })
	}
	img := testimage.Busybox(t)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx := context.Background()
			_, err := d.Client().ContainerCreate(ctx, client.ContainerCreateOptions{
				Name:       name,
				Config:     &container.Config{Image: img, Labels: map[string]string{labelTest: "reaper"}},
				HostConfig: &container.HostConfig{NetworkMode: "none"},
			})
			if err == nil {
				_, err = d.Client().ContainerStart(ctx, name, client.ContainerStartOptions{})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("start containers: %v", err)
	}
	return names
}
