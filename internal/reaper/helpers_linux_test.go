//go:build linux

package reaper_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// startContainers starts a container for each run id at once, labelled as
// that run's, and returns their names.
func startContainers(t testing.TB, d *docker.Driver, kind string, runIDs []string) []string {
	t.Helper()
	n := len(runIDs)
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
				Name: name,
				Config: &container.Config{Image: img, Labels: map[string]string{
					labelTest: "reaper", docker.LabelRunID: runIDs[i], docker.LabelRunIDAlt: runIDs[i],
				}},
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

// deadHost is an engine endpoint where nothing answers.
const deadHost = "unix:///nonexistent.sock"

// labelTest marks what these tests create, for a person looking at the
// engine; cleanups go by name.
const labelTest = "dev.rightsize.test"

// uniqueName is a sandbox or network name of the calling test's own.
func uniqueName(t testing.TB, kind string) string {
	return "rz-rt" + kind + "-" + randHex(t, 10)
}

var (
	engineOnce sync.Once
	engineDrv  *docker.Driver
	engineErr  error
)

// openDocker returns the real Docker backend, shared by the tests of this
// binary (its client is safe for concurrent use).
func openDocker(t testing.TB) *docker.Driver {
	t.Helper()
	testimage.Busybox(t) // skips or fails as every engine test here should
	engineOnce.Do(func() { engineDrv, engineErr = docker.Open(context.Background()) })
	if engineErr != nil {
		t.Fatalf("docker engine: %v", engineErr)
	}
	return engineDrv
}

// startContainer creates and starts a busybox container named name
// (sleep 3600) on network net ("" for none: no test here needs one, and
// the default bridge is one more thing that could fail), labelled as run
// runID's ("" for no run label: a stranger's container), removed by name
// when the test ends. It returns the container's id.
func startContainer(t testing.TB, d *docker.Driver, name, net, runID string, extra ...string) string {
	t.Helper()
	ctx := context.Background()
	hc := container.HostConfig{NetworkMode: "none"}
	if net != "" {
		hc.NetworkMode = container.NetworkMode(net)
	}
	labels := map[string]string{labelTest: "reaper"}
	if runID != "" {
		labels[docker.LabelRunID], labels[docker.LabelRunIDAlt] = runID, runID
	}
	for i := 0; i+1 < len(extra); i += 2 {
		labels[extra[i]] = extra[i+1]
	}
	t.Cleanup(func() { removeContainer(t, d, name) })
	res, err := d.Client().ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: testimage.Busybox(t), Labels: labels},
		HostConfig: &hc,
	})
	if err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	if _, err := d.Client().ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container %s: %v", name, err)
	}
	return res.ID
}

// removeContainer is for cleanups: gone already is fine.
func removeContainer(t testing.TB, d *docker.Driver, name string) {
	_, err := d.Client().ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !strings.Contains(strings.ToLower(err.Error()), "no such container") {
		t.Errorf("cleanup: %v", err)
	}
}

func containerExists(t testing.TB, d *docker.Driver, name string) bool {
	t.Helper()
	_, err := d.Client().ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	if err == nil {
		return true
	}
	if strings.Contains(strings.ToLower(err.Error()), "no such") {
		return false
	}
	t.Fatalf("inspect container %s: %v", name, err)
	return false
}

func networkExists(t testing.TB, d *docker.Driver, name string) bool {
	t.Helper()
	_, err := d.Client().NetworkInspect(context.Background(), name, client.NetworkInspectOptions{})
	if err == nil {
		return true
	}
	if strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "No such network") {
		return false
	}
	t.Fatalf("inspect network %s: %v", name, err)
	return false
}
