package keeper

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

func init() {
	// Ryuk's image cannot be pulled where these tests run; testimage's
	// engine lookup goes through testcontainers-go.
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !ok {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

// testLabel marks every container and network these tests make beside
// the run labels, so that their cleanup can find them all; its value is
// the test's own id.
const testLabel = "dev.rightsize.keeper-test"

// rig is one test's engine: a client, the busybox image for the run's
// containers, and the cleanup of all the test made.
type rig struct {
	t   testing.TB
	cli *client.Client
	img string
	id  string // the test's own id, testLabel's value
}

func newRig(t testing.TB) *rig {
	t.Helper()
	img := testimage.Busybox(t) // skips under -short or RIGHTSIZE_SKIP_ENGINE_TESTS
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Fatalf("the engine at %s: %v", cli.DaemonHost(), err)
	}
	r := &rig{t: t, cli: cli, img: img, id: newRunID(t)}
	t.Cleanup(func() {
		r.removeAll()
		cli.Close()
	})
	return r
}

func newRunID(t testing.TB) string {
	t.Helper()
	id, err := ledger.NewRunID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// runLabels are what package backend/docker puts on a run's containers
// and networks.
func runLabels(run string) map[string]string {
	return map[string]string{docker.LabelRunID: run, docker.LabelRunIDAlt: run}
}

// container creates and starts a busybox container named name (a random
// name when ""), with labels and the test's own label; it returns its id.
func (r *rig) container(name string, labels map[string]string, networks ...string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := map[string]string{testLabel: r.id}
	for k, v := range labels {
		l[k] = v
	}
	hc := &container.HostConfig{}
	if len(networks) > 0 {
		hc.NetworkMode = container.NetworkMode(networks[0])
	}
	res, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: r.img, Cmd: []string{"sleep", "3600"}, Labels: l},
		HostConfig: hc,
	})
	if err != nil {
		r.t.Fatalf("create %s: %v", name, err)
	}
	if _, err := r.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		r.t.Fatalf("start %s: %v", name, err)
	}
	return res.ID
}

// network creates a bridge network named name with labels and the test's
// own label; it returns its id.
func (r *rig) network(name string, labels map[string]string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := map[string]string{testLabel: r.id}
	for k, v := range labels {
		l[k] = v
	}
	res, err := r.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: l})
	if err != nil {
		r.t.Fatalf("create network %s: %v", name, err)
	}
	return res.ID
}

// exists reports whether the engine has the container (or, with net, the
// network) id; an engine that cannot tell fails the test.
func (r *rig) exists(id string, net bool) bool {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if net {
		_, err = r.cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
	} else {
		_, err = r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	}
	switch {
	case err == nil:
		return true
	case gone(err):
		return false
	default:
		r.t.Fatalf("inspect %s: %v", id, err)
		return false
	}
}

// state reports whether the container id exists, and runs.
func (r *rig) state(id string) (exists, running bool) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	switch {
	case gone(err):
		return false, false
	case err != nil:
		r.t.Fatalf("inspect %s: %v", id, err)
	}
	return true, res.Container.State != nil && res.Container.State.Running
}

// allGone waits until none of the containers and networks is on the
// engine and returns how long that took; it fails the test after within.
func (r *rig) allGone(within time.Duration, what string, ctrs, nets []string) time.Duration {
	r.t.Helper()
	return proctest.WaitUntil(r.t, within, what, func() bool {
		for _, id := range ctrs {
			if r.exists(id, false) {
				return false
			}
		}
		for _, id := range nets {
			if r.exists(id, true) {
				return false
			}
		}
		return true
	})
}

// keeperGone waits until the engine has no container named name.
func (r *rig) keeperGone(within time.Duration, name string) time.Duration {
	r.t.Helper()
	return proctest.WaitUntil(r.t, within, "keeper "+name+" to be gone", func() bool { return !r.exists(name, false) })
}

// start starts a keeper of run with opts, removed at the end of the test
// whatever happens.
func (r *rig) start(run string, opts Options) *Keeper {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, err := Start(ctx, r.cli, run, opts)
	if err != nil {
		r.t.Fatalf("Start: %v", err)
	}
	r.t.Cleanup(func() {
		if err := k.Remove(context.Background()); err != nil {
			r.t.Errorf("%v", err)
		}
	})
	return k
}

// removeAll removes every container, then every network, then every
// image, carrying the test's label, and every keeper of the runs the test used.
func (r *rig) removeAll() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := client.Filters{}.Add("label", testLabel+"="+r.id)
	if cl, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cl.Items {
			if _, err := r.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !gone(err) {
				r.t.Errorf("cleanup: remove container %s: %v", c.ID[:12], err)
			}
		}
	} else {
		r.t.Errorf("cleanup: list containers: %v", err)
	}
	if nl, err := r.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range nl.Items {
			if _, err := r.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !gone(err) {
				r.t.Errorf("cleanup: remove network %s: %v", n.Name, err)
			}
		}
	} else {
		r.t.Errorf("cleanup: list networks: %v", err)
	} // The builds' images, their untagged steps included (their cleanup
	// removed each build's tip; Podman keeps the steps).
	testimage.RemoveBuilt(ctx, r.cli, testLabel+"="+r.id)
}

// podman reports whether the engine is Podman.
func (r *rig) podman() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := r.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			return true
		}
	}
	return false
}

// logs is what container id wrote to stderr and stdout so far ("" when it
// is gone).
func (r *rig) logs(id string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := r.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out strings.Builder
	_, _ = stdcopy.StdCopy(&out, &out, rc)
	return out.String()
}

// gone reports whether err is the engine saying there is no such thing,
// or that it is going.
func gone(err error) bool {
	// A removal under way is another remover's (a sweep of another
	// package's test on this engine): it ends with the thing gone.
	return errors.Is(docker.Classify("", err), backend.ErrNotFound) || docker.IsRemoving(err)
}
