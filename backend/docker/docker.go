package docker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/backend"
)

// Labels rightsize puts on ordinary containers and networks: the run id,
// under both spellings the family uses (Kotlin and Node write runId, Rust
// run_id), so any member's run-scoped listing finds them.
const (
	LabelRunID    = "dev.rightsize.runId"
	LabelRunIDAlt = "dev.rightsize.run_id"
	// LabelReuse marks a keep-alive container, instead of the run labels.
	LabelReuse = "dev.rightsize.reuse"
)

// EnvHostOverride is testcontainers-go's variable for the host published
// ports are reached on; it is honoured when set.
const EnvHostOverride = "TESTCONTAINERS_HOST_OVERRIDE"

func init() {
	backend.Register(backend.Docker, func(ctx context.Context) (backend.Driver, error) {
		d, err := Open(ctx)
		if err != nil {
			return nil, err // not a nil *Driver in a non-nil interface
		}
		return d, nil
	})
}

// Driver is the Docker backend.
type Driver struct {
	cli *client.Client
	// daemonHost is the engine as the client reaches it; endpoint is the
	// same, canonical (a unix socket path with its links resolved), so two
	// spellings of one engine compare equal.
	daemonHost string
	endpoint   string
	// local: the engine runs on this machine, so ports are published on
	// its loopback address only and reached at 127.0.0.1.
	local bool
	host  string
	// chosen: the engine was named (DOCKER_HOST, OpenHost), not the one a
	// process with no configuration reaches.
	chosen bool

	cliOnce sync.Once
	cliPath string
	cliErr  error
}

// Open connects to the engine testcontainers-go resolves. When none
// answers, the error wraps backend.ErrUnreachable and says what was tried.
func Open(ctx context.Context) (*Driver, error) {
	tc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", backend.ErrUnreachable, err)
	}
	if _, err := tc.Ping(ctx, client.PingOptions{}); err != nil {
		tc.Close()
		return nil, fmt.Errorf("%w: %s: %v", backend.ErrUnreachable, tc.DaemonHost(), err)
	}
	if err := checkDockerHost(ctx, tc.DaemonHost()); err != nil {
		tc.Close()
		return nil, err
	}
	d := newDriver(tc.Client)
	d.chosen = os.Getenv("DOCKER_HOST") != ""
	return d, nil
}

// checkDockerHost fails when DOCKER_HOST names an engine that does not
// answer. testcontainers-go passes over such a DOCKER_HOST and takes the
// next engine it finds (the default socket, say): a user who named an
// engine must not be given another one without a word. A DOCKER_HOST that
// answers while testcontainers-go chose another engine (its tc.host
// property comes first) is testcontainers-go's rule, and kept.
func checkDockerHost(ctx context.Context, chosen string) error {
	want := os.Getenv("DOCKER_HOST")
	if want == "" {
		return nil
	}
	w, _ := canonicalEndpoint(want)
	if c, _ := canonicalEndpoint(chosen); c == w {
		return nil
	}
	cli, err := client.New(client.FromEnv)
	if err == nil {
		defer cli.Close()
		_, err = cli.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		return fmt.Errorf("%w: DOCKER_HOST=%s: %v (an engine answers at %s: unset DOCKER_HOST to use it)", backend.ErrUnreachable, want, err, chosen)
	}
	return nil
}

func newDriver(cli *client.Client) *Driver {
	d := &Driver{cli: cli, daemonHost: cli.DaemonHost()}
	d.endpoint, d.local = canonicalEndpoint(d.daemonHost)
	d.host = publishedHost(d.daemonHost, d.local)
	return d
}

// canonicalEndpoint resolves a unix socket's symbolic links
// (/var/run/docker.sock and /run/docker.sock are one engine) and tells
// whether the engine is on this machine.
func canonicalEndpoint(daemonHost string) (string, bool) {
	u, err := url.Parse(daemonHost)
	if err != nil {
		return daemonHost, false
	}
	switch u.Scheme {
	case "unix":
		p := u.Path
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return "unix://" + p, true
	case "npipe":
		return daemonHost, true
	case "tcp", "http", "https":
		switch u.Hostname() {
		case "localhost", "127.0.0.1", "::1":
			return daemonHost, true
		}
	}
	return daemonHost, false
}

// publishedHost is where published ports are reached from this process:
// TESTCONTAINERS_HOST_OVERRIDE when set; 127.0.0.1 for a local engine (ports
// are published there and nowhere else); the engine's host name otherwise.
// testcontainers-go guesses a gateway address instead whenever /.dockerenv
// exists, which is wrong when the engine runs beside this process.
func publishedHost(daemonHost string, local bool) string {
	if h, ok := os.LookupEnv(EnvHostOverride); ok && h != "" {
		return h
	}
	if local {
		return "127.0.0.1"
	}
	if u, err := url.Parse(daemonHost); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "localhost"
}

// Name is backend.Docker.
func (d *Driver) Name() string { return backend.Docker }

// DefaultEndpoint reports whether this is the engine a process with no
// configuration reaches: DOCKER_HOST is not set (and the driver was not
// made by OpenHost).
func (d *Driver) DefaultEndpoint() bool { return !d.chosen }

// Endpoint is the engine, canonical: "unix:///run/docker.sock".
func (d *Driver) Endpoint() string { return d.endpoint }

// DaemonHost is the engine as this process reaches it (DOCKER_HOST syntax).
func (d *Driver) DaemonHost() string { return d.daemonHost }

// Host is where published ports are reached.
func (d *Driver) Host() string { return d.host }

// Client is the Docker API client the driver uses.
func (d *Driver) Client() *client.Client { return d.cli }

// Close releases the API client.
func (d *Driver) Close() error { return d.cli.Close() }

// dockerCLI finds the docker command line, which the watchdog needs.
func (d *Driver) dockerCLI() (string, error) {
	d.cliOnce.Do(func() {
		p, err := exec.LookPath("docker")
		if err != nil {
			d.cliErr = fmt.Errorf("the docker command line is not on PATH (%v): no watchdog can remove containers after a crash; the next process's sweep will", err)
			return
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		d.cliPath = p
	})
	return d.cliPath, d.cliErr
}

// WatchdogPlan removes the run's containers with one `docker rm -f` for all
// of them, then its networks one by one, against this driver's engine.
func (d *Driver) WatchdogPlan() (backend.WatchdogPlan, error) {
	docker, err := d.dockerCLI()
	if err != nil {
		return backend.WatchdogPlan{}, err
	}
	env := []string{"DOCKER_HOST=" + d.daemonHost}
	// TLS settings travel with the endpoint; a context would override
	// DOCKER_HOST's meaning, so it is cleared.
	for _, k := range []string{"DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION", "DOCKER_CONFIG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "DOCKER_CONTEXT=")
	return backend.WatchdogPlan{
		Env: env,
		Steps: []backend.WatchdogStep{
			{List: "sandboxes", Batch: true, Gone: []string{"No such container"}, Command: []string{docker, "rm", "-f"}},
			{List: "networks", Gone: []string{"No such network", "not found"}, Command: []string{docker, "network", "rm"}},
		},
	}, nil
}

// classify maps an engine error to the backend's errors.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case isNotFound(err):
		return fmt.Errorf("%s: %w", what, backend.ErrNotFound)
	case strings.Contains(msg, "active endpoints"):
		return fmt.Errorf("%s: %w: %s", what, backend.ErrInUse, msg)
	case client.IsErrConnectionFailed(err), errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%s: %w: %s", what, backend.ErrUnreachable, msg)
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}
