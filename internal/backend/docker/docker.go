package docker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// Labels rightsize puts on ordinary containers and networks (the
// backend's, shared by every engine that keeps labels).
const (
	LabelRunID    = backend.LabelRunID
	LabelRunIDAlt = backend.LabelRunIDAlt
	LabelReuse    = backend.LabelReuse
	// LabelKept marks what a run creates while an engine-side keeper holds
	// its lease (package internal/keeper); its value is the lease timeout,
	// a Go duration. Only such a run may be judged dead for want of a
	// keeper: another member's run, or a run that had none, never is.
	LabelKept = "dev.rightsize.kept"
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
	backend.RegisterEndpoint(backend.Docker, func(host string) (backend.Driver, error) {
		d, err := OpenHost(host)
		if err != nil {
			return nil, err
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
	// netOnce decides, at first need, where published ports are bound and
	// reached (reach.go): it may ask the engine, which OpenHost must not.
	netOnce sync.Once
	netV    reach
	// isDefault: the engine is the one a process with no configuration
	// reaches (the default socket, however it was named).
	isDefault bool

	// kindMu serialises asking whether the engine is Podman; kindKnown
	// is set once it has answered, podman is the answer.
	kindMu    sync.Mutex
	podman    bool
	kindKnown atomic.Bool

	note string

	// kept holds, by run id, the lease timeout of each run whose keeper
	// holds a lease on this engine (MarkKept).
	kept sync.Map
}

var _ backend.RunLister = (*Driver)(nil)

// Open connects to the engine testcontainers-go resolves (its
// ~/.testcontainers.properties tc.host, DOCKER_HOST, the default socket).
// When none answers, the error wraps backend.ErrUnreachable and says what
// was tried.
func Open(ctx context.Context) (*Driver, error) {
	if err := checkNamedHost(ctx); err != nil {
		return nil, err
	}
	note, pulled := prepareRyuk(ctx)
	if pulled {
		// The engine answered, then a registry took its time: what waits
		// on the engine next has backend.ResolveTimeout afresh, and still
		// ends when the caller cancels.
		fresh, cancel := context.WithTimeout(context.WithoutCancel(ctx), backend.ResolveTimeout)
		defer cancel()
		stop := context.AfterFunc(ctx, func() {
			if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				cancel()
			}
		})
		defer stop()
		ctx = fresh
	}
	tc, err := newTCClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", backend.ErrUnreachable, err)
	}
	if _, err := tc.Ping(ctx, client.PingOptions{}); err != nil {
		tc.Close()
		return nil, fmt.Errorf("%w: %s: %v", backend.ErrUnreachable, tc.DaemonHost(), err)
	}
	if err := checkChosen(os.Getenv("DOCKER_HOST"), testcontainers.ReadConfig().Config.TestcontainersHost, tc.DaemonHost()); err != nil {
		tc.Close()
		return nil, err
	}
	cli := tc.Client
	if up := os.Getenv(EnvUpstream); up != "" && canonicalEndpoint(tc.DaemonHost()) == canonicalEndpoint(os.Getenv("DOCKER_HOST")) {
		// DOCKER_HOST is a guard's proxy (guardall.go): this driver talks
		// to the engine behind it, and so will its watchdog.
		upCli, err := client.New(client.WithHost(up))
		if err != nil {
			tc.Close()
			return nil, fmt.Errorf("%w: %s (behind the guard's proxy %s): %v", backend.ErrUnreachable, up, tc.DaemonHost(), err)
		}
		tc.Close()
		cli = upCli
	}
	d := newDriver(ctx, cli)
	d.note = note
	return d, nil
}

// newTCClient is testcontainers-go's client of the engine it chooses. It
// panics when that engine answered its first questions and not the one
// that learns its socket in time (MustExtractDockerSocket, bounded by
// ctx): an engine that stops answering, as Podman does while a build
// holds its storage. That panic is the error it stands for here, not the
// end of the test process.
func newTCClient(ctx context.Context) (tc *testcontainers.DockerClient, err error) {
	defer func() {
		if p := recover(); p != nil {
			tc, err = nil, fmt.Errorf("testcontainers-go could not learn the engine's socket: %v", p)
		}
	}()
	return testcontainers.NewDockerClientWithOpts(ctx)
}

// Note is what the driver's opening found that its user should hear of
// once (Ryuk turned off, say); "" when nothing.
func (d *Driver) Note() string { return d.note }

// OpenHost returns a driver for the engine at host, in DOCKER_HOST syntax
// ("unix:///var/run/docker.sock", "tcp://10.0.0.5:2376"), without asking it
// anything: unlike Open it neither resolves an engine nor fails when none
// answers there, so that a sweep can be pointed at one given engine.
func OpenHost(host string) (*Driver, error) {
	// DOCKER_API_VERSION, when set, spares the first request its
	// negotiation (a watchdog is given its owner's: engineEnv).
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionFromEnv())
	if err != nil {
		return nil, fmt.Errorf("docker engine %s: %w", host, err)
	}
	d := newDriver(context.Background(), cli)
	if k := os.Getenv(envEngineKind); (k == "docker" || k == "podman") && os.Getenv("DOCKER_HOST") == host {
		// What the owner learnt of this engine, given to its watchdog.
		d.podman = k == "podman"
		d.kindKnown.Store(true)
	}
	return d, nil
}

// checkNamedHost asks the engine DOCKER_HOST names, when it names one,
// and fails when it does not answer, before testcontainers-go is asked for
// an engine: it passes over such a DOCKER_HOST and tries every other engine
// it knows (the default socket, Docker Desktop's, Podman's). A user who
// named an engine must not be given another one without a word, nor have
// engines they did not name asked. A socket at the default path is named
// in the error, not asked. (A DOCKER_HOST that answers while
// testcontainers-go chooses another engine, by its tc.host property, is
// testcontainers-go's rule, and kept.)
func checkNamedHost(ctx context.Context) error {
	want := os.Getenv("DOCKER_HOST")
	if want == "" {
		return nil
	}
	cli, err := client.New(client.FromEnv)
	if err == nil {
		defer cli.Close()
		_, err = cli.Ping(ctx, client.PingOptions{})
	}
	if err == nil {
		return nil
	}
	hint := ""
	if def := defaultHost(); canonicalEndpoint(def) != canonicalEndpoint(want) {
		path, isUnix := strings.CutPrefix(def, "unix://")
		if fi, serr := os.Stat(path); isUnix && serr == nil && fi.Mode()&os.ModeSocket != 0 {
			hint = " (there is a socket at " + path + ", not asked: unset DOCKER_HOST to use it)"
		}
	}
	return fmt.Errorf("%w: DOCKER_HOST=%s: %v%s", backend.ErrUnreachable, want, err, hint)
}

// checkChosen fails when testcontainers-go took another engine than the
// one DOCKER_HOST names, though that one answered checkNamedHost a moment
// before. Its tc.host property comes before DOCKER_HOST, and a choice it
// made is kept. But testcontainers-go makes its choice once per process,
// at its own look: a DOCKER_HOST that failed that look (an engine
// restarting, a proxy that dropped a request) would have every container
// of the process made on the engine it took instead.
func checkChosen(want, tcHost, chosen string) error {
	if want == "" || canonicalEndpoint(want) == canonicalEndpoint(chosen) {
		return nil
	}
	if tcHost != "" && canonicalEndpoint(tcHost) == canonicalEndpoint(chosen) {
		return nil
	}
	return fmt.Errorf("%w: DOCKER_HOST=%s did not answer testcontainers-go's first look, so it took %s instead for the life of this process; nothing is made on an engine you did not name (DOCKER_HOST answers now: the next test process uses it)", backend.ErrUnreachable, want, chosen)
}

func newDriver(_ context.Context, cli *client.Client) *Driver {
	d := &Driver{cli: cli, daemonHost: cli.DaemonHost()}
	d.endpoint = canonicalEndpoint(d.daemonHost)
	d.isDefault = d.endpoint == canonicalEndpoint(defaultHost())
	return d
}

// defaultHost is the engine a process with no configuration reaches, as
// the docker command line and the other members of the family find it.
func defaultHost() string {
	if runtime.GOOS == "windows" {
		return "npipe:////./pipe/docker_engine"
	}
	return "unix:///var/run/docker.sock"
}

// SpokenEndpoint is endpoint as people know it: the default socket spelled
// as testcontainers-go and the docker command line spell it
// (unix:///var/run/docker.sock), not as the link it resolves through
// (unix:///run/docker.sock on most Linux hosts). For display only: records
// keep the resolved form, which is how engines are matched.
func SpokenEndpoint(endpoint string) string {
	if endpoint != "" && endpoint == canonicalEndpoint(defaultHost()) {
		return defaultHost()
	}
	return endpoint
}

// canonicalEndpoint resolves a unix socket's symbolic links
// (/var/run/docker.sock and /run/docker.sock are one engine).
func canonicalEndpoint(daemonHost string) string {
	u, err := url.Parse(daemonHost)
	if err != nil || u.Scheme != "unix" {
		return daemonHost
	}
	p := u.Path
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return "unix://" + p
}

// Name is backend.Docker.
func (d *Driver) Name() string { return backend.Docker }

// DefaultEndpoint reports whether this is the engine a process with no
// configuration reaches: the default socket, whether reached through it,
// through a DOCKER_HOST or a tc.host that spell it out, or through a link
// to it.
func (d *Driver) DefaultEndpoint() bool { return d.isDefault }

// Endpoint is the engine, canonical: "unix:///run/docker.sock".
func (d *Driver) Endpoint() string { return d.endpoint }

// DaemonHost is the engine as this process reaches it (DOCKER_HOST syntax).
func (d *Driver) DaemonHost() string { return d.daemonHost }

// Host is where published ports are reached.
func (d *Driver) Host() string { return d.net().host }

// net is where published ports are bound and reached, decided once.
func (d *Driver) net() reach {
	d.netOnce.Do(func() { d.netV = resolveReach(context.Background(), d.cli, d.daemonHost) })
	return d.netV
}

// Remote reports whether the engine is another machine's (over SSH, or
// TCP to a host that is not a loopback name): what this machine keeps of
// a run, its ledger and its watchdog, dies with it.
func (d *Driver) Remote() bool { return !localEngine(d.daemonHost) }

// MarkKept makes what the driver creates for run runID from now on carry
// LabelKept with the lease timeout of its keeper: for a sweep on any
// machine, the sign that the run had a keeper.
func (d *Driver) MarkKept(runID string, lease time.Duration) { d.kept.Store(runID, lease.String()) }

// RunLabels are the labels of run runID's ordinary containers and
// networks, whichever path creates them (Create, Track, a network, the
// guard of every create: backend.RunLabeler): the run's, and LabelKept
// once the run has a keeper.
func (d *Driver) RunLabels(runID string) map[string]string {
	l := runLabels(runID)
	if v, ok := d.kept.Load(runID); ok {
		l[LabelKept] = v.(string)
	}
	return l
}

// Client is the Docker API client the driver uses.
func (d *Driver) Client() *client.Client { return d.cli }

// Close releases the API client.
func (d *Driver) Close() error { return d.cli.Close() }

// Watchdog: the watchdog reaches this engine as this process does.
func (d *Driver) Watchdog(runID string) (backend.WatchdogPlan, error) {
	return backend.WatchdogPlan{Env: d.engineEnv()}, nil
}

// engineEnv is what a watchdog needs in its environment to reach this
// engine: DOCKER_HOST, the TLS settings that travel with it, and no
// context (which would override DOCKER_HOST's meaning).
func (d *Driver) engineEnv() []string {
	env := []string{"DOCKER_HOST=" + d.daemonHost}
	for _, k := range []string{"DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION", "DOCKER_CONFIG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	answers := true
	if _, ok := os.LookupEnv("DOCKER_API_VERSION"); !ok {
		// The version this process agreed with the engine: a watchdog
		// woken by its owner's death then sends its first removal at
		// once, without asking the engine's version first.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := d.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
		if answers = err == nil; answers {
			env = append(env, "DOCKER_API_VERSION="+d.cli.ClientVersion())
		}
		cancel()
	}
	// Which engine it is (asked here where it answers): the watchdog
	// then removes its first container without asking (removeID).
	if answers {
		d.isPodman()
	}
	if d.kindKnown.Load() {
		kind := "docker"
		if d.podman {
			kind = "podman"
		}
		env = append(env, envEngineKind+"="+kind)
	}
	return append(env, "DOCKER_CONTEXT=", "RIGHTSIZE_BACKEND="+backend.Docker)
}

// envEngineKind tells a watchdog which engine its owner found at its
// DOCKER_HOST: "docker" or "podman".
const envEngineKind = "RIGHTSIZE_DOCKER_ENGINE"

// isPodman reports whether the engine says it is Podman; false when it
// cannot tell (engineKind).
func (d *Driver) isPodman() bool {
	podman, _ := d.engineKind()
	return podman
}

// engineKind reports whether the engine says it is Podman, and whether it
// said what it is at all (known). The engine's answer is kept; a failed
// question is asked again next time.
func (d *Driver) engineKind() (podman, known bool) {
	if d.kindKnown.Load() {
		return d.podman, true
	}
	d.kindMu.Lock()
	defer d.kindMu.Unlock()
	if d.kindKnown.Load() {
		return d.podman, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	v, err := d.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return false, false
	}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			d.podman = true
		}
	}
	d.kindKnown.Store(true)
	return d.podman, true
}

// Warm asks the engine, ahead of need, what a removal will want to know:
// the API version the client speaks (its first request negotiates it) and
// whether the engine is Podman. A native watchdog calls it while its owner
// lives, so that nothing but the removals is left for after the death.
func (d *Driver) Warm() { d.isPodman() }

// removeParallel is how many removals run at once. Docker's engine
// does its removals one after another whatever the parallelism: four at
// once hide the round trips, and more only contend. Podman removes in
// parallel: sixteen at once, as the docker command line does with many
// names (BENCHMARKS.md, "On Podman": 20 containers, 1.07 times the floor
// with four, 0.99 with sixteen). A removal never waits to learn which:
// until the engine has said (Warm, Watchdog), it is four.
func (d *Driver) removeParallel() int {
	if d.kindKnown.Load() && d.podman {
		return 16
	}
	return 4
}
