//go:build linux

package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// The labels the product puts on a run's containers and networks (both
// spellings of the family). Spelled out here rather than taken from the
// product, so that a renamed label fails the matrix instead of following it.
const (
	LabelRunID    = "dev.rightsize.runId"
	LabelRunIDAlt = "dev.rightsize.run_id"
	// LabelImageRun marks an image a run built (sandboxtest.NewImage, a
	// build through GuardAll) with the run's id.
	LabelImageRun = "dev.rightsize.image.runId"
)

// Engine is a Docker engine, asked directly through its API.
type Engine struct {
	Host string
	cli  *client.Client
}

// NewEngine connects to host ("unix:///var/run/docker.sock",
// "tcp://127.0.0.1:23750"), or to DOCKER_HOST / the default socket when host
// is empty.
func NewEngine(ctx context.Context, host string) (*Engine, error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, err
	}
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("engine %s: %w", cli.DaemonHost(), err)
	}
	return &Engine{Host: cli.DaemonHost(), cli: cli}, nil
}

// Client is the API client.
func (e *Engine) Client() *client.Client { return e.cli }

// Close releases the client.
func (e *Engine) Close() error { return e.cli.Close() }

// NotFound reports whether an engine error means "no such object".
func NotFound(err error) bool {
	if err == nil {
		return false
	}
	if cerrdefs.IsNotFound(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "No such container") || strings.Contains(msg, "No such network") ||
		strings.Contains(msg, "No such image") || strings.Contains(msg, "not found")
}

// RunContainers lists the containers (any state) labelled with run id, by
// name, under either spelling of the label.
func (e *Engine) RunContainers(ctx context.Context, runID string) ([]string, error) {
	var out []string
	for _, l := range []string{LabelRunID, LabelRunIDAlt} {
		res, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", l+"="+runID)})
		if err != nil {
			return nil, err
		}
		for _, c := range res.Items {
			n := c.ID
			if len(c.Names) > 0 {
				n = strings.TrimPrefix(c.Names[0], "/")
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// RunNetworks lists the networks labelled with run id.
func (e *Engine) RunNetworks(ctx context.Context, runID string) ([]string, error) {
	var out []string
	for _, l := range []string{LabelRunID, LabelRunIDAlt} {
		res, err := e.cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.Add("label", l+"="+runID)})
		if err != nil {
			return nil, err
		}
		for _, n := range res.Items {
			if !slices.Contains(out, n.Name) {
				out = append(out, n.Name)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// RunLeft describes what of run id is still on the engine ("" when
// nothing): containers, named volumes and networks by label, and the
// named networks.
func (e *Engine) RunLeft(ctx context.Context, runID string, networks []string) (string, error) {
	cs, err := e.RunContainers(ctx, runID)
	if err != nil {
		return "", err
	}
	ns, err := e.RunNetworks(ctx, runID)
	if err != nil {
		return "", err
	}
	for _, n := range networks {
		if n == "" || slices.Contains(ns, n) {
			continue
		}
		ok, err := e.NetworkExists(ctx, n)
		if err != nil {
			return "", err
		}
		if ok {
			ns = append(ns, n)
		}
	}
	vs, err := e.RunVolumes(ctx, runID)
	if err != nil {
		return "", err
	}
	is, err := e.RunImages(ctx, runID)
	if err != nil {
		return "", err
	}
	var parts []string
	if len(is) > 0 {
		parts = append(parts, fmt.Sprintf("images %q", is))
	}
	if len(cs) > 0 {
		parts = append(parts, fmt.Sprintf("containers %q", cs))
	}
	if len(vs) > 0 {
		parts = append(parts, fmt.Sprintf("volumes %q", vs))
	}
	if len(ns) > 0 {
		parts = append(parts, fmt.Sprintf("networks %q", ns))
	}
	return strings.Join(parts, ", "), nil
}

// RunVolumes lists the named volumes labelled with run id.
func (e *Engine) RunVolumes(ctx context.Context, runID string) ([]string, error) {
	var out []string
	for _, l := range []string{LabelRunID, LabelRunIDAlt} {
		res, err := e.cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", l+"="+runID)})
		if err != nil {
			return nil, err
		}
		for _, v := range res.Items {
			if !slices.Contains(out, v.Name) {
				out = append(out, v.Name)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// RunImages lists the images, intermediate ones too, that run id built,
// by id.
func (e *Engine) RunImages(ctx context.Context, runID string) ([]string, error) {
	res, err := e.cli.ImageList(ctx, client.ImageListOptions{All: true, Filters: client.Filters{}.Add("label", LabelImageRun+"="+runID)})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, im := range res.Items {
		out = append(out, im.ID)
	}
	slices.Sort(out)
	return out, nil
}

// ImageOf is the image container name was created from, as the engine
// recorded its name: as given on Docker, qualified on Podman (SameImage
// compares the two).
func (e *Engine) ImageOf(ctx context.Context, name string) (string, error) {
	res, err := e.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return "", err
	}
	if res.Container.Config == nil {
		return "", fmt.Errorf("container %s: the engine gives no config", name)
	}
	return res.Container.Config.Image, nil
}

// SameImage says whether image references a and b name the same image:
// Podman records a short name qualified (docker.io/library/x:latest for
// x), Docker as given.
func SameImage(a, b string) bool {
	na, errA := reference.ParseNormalizedNamed(a)
	nb, errB := reference.ParseNormalizedNamed(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return reference.TagNameOnly(na).String() == reference.TagNameOnly(nb).String()
}

// Mounts lists the named volumes container name mounts, as
// "volume:destination".
func (e *Engine) Mounts(ctx context.Context, name string) ([]string, error) {
	res, err := e.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range res.Container.Mounts {
		if m.Type == "volume" {
			out = append(out, m.Name+":"+m.Destination)
		}
	}
	return out, nil
}

// ContainerState reports whether a container exists and whether it runs.
func (e *Engine) ContainerState(ctx context.Context, name string) (exists, running bool, err error) {
	res, err := e.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if NotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, res.Container.State != nil && res.Container.State.Running, nil
}

// ContainerID is the full id of the named container.
func (e *Engine) ContainerID(ctx context.Context, name string) (string, error) {
	res, err := e.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return "", err
	}
	return res.Container.ID, nil
}

// Label is the value of label key on the named container ("" when unset).
func (e *Engine) Label(ctx context.Context, name, key string) (string, error) {
	res, err := e.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return "", err
	}
	if res.Container.Config == nil {
		return "", nil
	}
	return res.Container.Config.Labels[key], nil
}

// NetworkExists reports whether a network of that name (or id) exists.
func (e *Engine) NetworkExists(ctx context.Context, name string) (bool, error) {
	_, err := e.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if NotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// RunContainer creates and starts a container named name running cmd
// (the image's own when empty), with labels, and no network when noNet.
func (e *Engine) RunContainer(ctx context.Context, image, name string, cmd []string, labels map[string]string, noNet bool) (string, error) {
	hc := &container.HostConfig{}
	if noNet {
		hc.NetworkMode = "none"
	}
	res, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: image, Cmd: cmd, Labels: labels},
		HostConfig: hc,
	})
	if err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := e.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		_ = e.Remove(ctx, name)
		return "", fmt.Errorf("start %s: %w", name, err)
	}
	return res.ID, nil
}

// Remove force-removes containers by name, a few at a time; one that is
// not there is no error.
func (e *Engine) Remove(ctx context.Context, names ...string) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 4)
	)
	for _, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := e.cli.ContainerRemove(ctx, n, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !NotFound(err) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("remove %s: %w", n, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RemoveNetworks removes networks by name; one that is not there is no
// error.
func (e *Engine) RemoveNetworks(ctx context.Context, names ...string) error {
	var errs []error
	for _, n := range names {
		if _, err := e.cli.NetworkRemove(ctx, n, client.NetworkRemoveOptions{}); err != nil && !NotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// RemoveRun removes every container, then every network, labelled with
// run id: the last-resort cleanup of a test, after its assertions. It
// returns what it removed.
func (e *Engine) RemoveRun(ctx context.Context, runID string) ([]string, error) {
	cs, err := e.RunContainers(ctx, runID)
	if err != nil {
		return nil, err
	}
	ns, err := e.RunNetworks(ctx, runID)
	if err != nil {
		return nil, err
	}
	err = errors.Join(e.Remove(ctx, cs...), e.RemoveNetworks(ctx, ns...))
	return append(cs, ns...), err
}

// Describe says what the container or network named name is: when it was
// created, and a container's state ("created", "running", …; "network"
// for a network).
func (e *Engine) Describe(ctx context.Context, name string) (created time.Time, state string, err error) {
	c, err := e.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err == nil {
		created, _ = time.Parse(time.RFC3339Nano, c.Container.Created)
		if c.Container.State != nil {
			state = string(c.Container.State.Status)
		}
		return created, state, nil
	}
	if !NotFound(err) {
		return time.Time{}, "", err
	}
	n, err := e.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil {
		return time.Time{}, "", err
	}
	return n.Network.Created, "network", nil
}

// ImageExists reports whether the engine has image ref.
func (e *Engine) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := e.cli.ImageInspect(ctx, ref)
	if NotFound(err) || (err != nil && strings.Contains(err.Error(), "No such image")) {
		return false, nil
	}
	return err == nil, err
}

// CopyImage copies image ref from e to dst: ImageSave here, ImageLoad
// there.
func (e *Engine) CopyImage(ctx context.Context, ref string, dst *Engine) error {
	rc, err := e.cli.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("save %s: %w", ref, err)
	}
	defer rc.Close()
	res, err := dst.cli.ImageLoad(ctx, rc)
	if err != nil {
		return fmt.Errorf("load %s into %s: %w", ref, dst.Host, err)
	}
	defer res.Close()
	out, err := io.ReadAll(res)
	if err != nil {
		return fmt.Errorf("load %s into %s: %w", ref, dst.Host, err)
	}
	if strings.Contains(string(out), `"error"`) {
		return fmt.Errorf("load %s into %s: %s", ref, dst.Host, out)
	}
	return nil
}
