package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/apiproxy"
	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/origin"
)

// EnvUpstream is set, for a process that guards every create (and the
// children that inherit its environment), to the engine behind the proxy
// that DOCKER_HOST then names. A driver opened through the proxy talks to
// this engine directly, records it as the run's endpoint and gives it to
// its watchdog: the proxy goes with the process, the engine does not.
const EnvUpstream = "RIGHTSIZE_DOCKER_UPSTREAM"

// guardEnv is what the guard changes in the process's environment.
var guardEnv = []string{"DOCKER_HOST", "DOCKER_CONTEXT", EnvUpstream, envRyukDisabled}

func init() {
	backend.RegisterAllGuard(backend.Docker, startAllGuard)
}

// allGuard is a proxy of the engine's API on a private socket, announced
// through DOCKER_HOST, that labels every container and network created
// through it with the run's labels (the hook's, which its driver's
// RunLabels decides) after the hook admitted it.
type allGuard struct {
	px   *apiproxy.Proxy
	cli  *client.Client // the engine itself, for the hook's checks
	note string
	// saved is the environment before the guard, restored by Close; nil
	// when the guard did not change it.
	saved map[string]*string
	once  sync.Once
}

// startAllGuard finds the engine (without asking testcontainers-go, which
// would keep its answer for the life of the process), starts the guard in
// front of it and points this process at it.
func startAllGuard(ctx context.Context, dir string, h backend.GuardHook) (backend.AllGuard, error) {
	if runtime.GOOS == "windows" {
		return nil, errors.New("guarding every create needs a unix socket for its proxy: not on Windows")
	}
	up, err := guardUpstream()
	if err != nil {
		return nil, err
	}
	g, err := newAllGuard(ctx, up, dir, h)
	if err != nil {
		return nil, err
	}
	g.saved = map[string]*string{}
	for _, k := range guardEnv {
		if v, ok := os.LookupEnv(k); ok {
			g.saved[k] = &v
		} else {
			g.saved[k] = nil
		}
	}
	os.Setenv("DOCKER_HOST", g.px.Addr())
	os.Unsetenv("DOCKER_CONTEXT")
	os.Setenv(EnvUpstream, up)
	if v := os.Getenv(envRyukDisabled); v != "true" {
		os.Setenv(envRyukDisabled, "true")
		g.note = "every container this test binary creates is guarded: testcontainers-go's Ryuk is turned off for it (" + envRyukDisabled + "=true), as the watchdog and the sweep remove them"
	}
	if err := tcPastGuard(ctx, g.px); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// tcPastGuard fails when testcontainers-go would send this process's
// containers past the guard px. It resolves its engine once per process
// and keeps it: one resolved before the guard (a provider, a client or a
// container made by a package-level variable or an init, which run before
// TestMain) is the engine itself, and every container it makes from then
// on escapes the run. Resolved here first, it is the guard, as it should
// be, unless its look through the guard failed (an engine that dropped the
// request): it then takes another engine it knows, for good. (A Docker
// client made before the guard is not seen: docs/using.md says where to
// make clients.)
func tcPastGuard(ctx context.Context, px *apiproxy.Proxy) error {
	before := px.Accepted()
	tc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil // Open, next, says why it cannot reach the engine
	}
	host := tc.DaemonHost()
	tc.Close()
	if canonicalEndpoint(host) == canonicalEndpoint(px.Addr()) {
		return nil
	}
	if px.Accepted() > before {
		return fmt.Errorf("%w: testcontainers-go's first look at the engine, through the guard, failed, so it took %s instead and keeps it for the life of the process: every container it makes would escape the guard and outlive a killed test binary; run the tests again once the engine answers", backend.ErrUnreachable, host)
	}
	return fmt.Errorf("testcontainers-go found its engine (%s) before Main started the guard, and keeps it for the life of the process: every container it makes would escape the guard and outlive a killed test binary. Something made a testcontainers-go provider, client or container before TestMain (a package-level variable or an init): make it in a test or a Setup function instead", host)
}

// newAllGuard checks that the engine at up answers, and starts the proxy
// in front of it on dir/docker.sock. The environment is left as it is.
func newAllGuard(ctx context.Context, up, dir string, h backend.GuardHook) (*allGuard, error) {
	cli, err := client.New(client.WithHost(up))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", backend.ErrUnreachable, up, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = cli.Ping(pctx, client.PingOptions{})
	cancel()
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w: %s: %v", backend.ErrUnreachable, up, err)
	}
	px, err := apiproxy.Start(filepath.Join(dir, "docker.sock"), up, newProxyHook(h, cli))
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &allGuard{px: px, cli: cli}, nil
}

func (g *allGuard) Note() string { return g.note }

func (g *allGuard) Close() error {
	var err error
	g.once.Do(func() {
		err = g.px.Close()
		g.cli.Close()
		for k, v := range g.saved {
			if v == nil {
				os.Unsetenv(k)
			} else {
				os.Setenv(k, *v)
			}
		}
	})
	return err
}

// guardUpstream is the engine testcontainers-go and the docker command
// line would use, where that can be told without them: DOCKER_HOST, else
// the default socket, else a rootless or Desktop one. A tc.host property
// or a Docker context would send testcontainers-go or the docker command
// line elsewhere than DOCKER_HOST, past the proxy: both are refused with
// what to do instead.
func guardUpstream() (string, error) {
	if v, ok := property("tc.host"); ok && v != "" {
		return "", fmt.Errorf("~/.testcontainers.properties sets tc.host=%s, which testcontainers-go ranks above DOCKER_HOST: its containers would not pass through the guard. Remove tc.host and set DOCKER_HOST=%s instead", v, v)
	}
	if os.Getenv("DOCKER_TLS_VERIFY") != "" || os.Getenv("DOCKER_CERT_PATH") != "" {
		return "", errors.New("the engine is reached over TLS (DOCKER_TLS_VERIFY or DOCKER_CERT_PATH is set), which the guard's proxy does not speak")
	}
	if v := os.Getenv("DOCKER_HOST"); v != "" {
		if !strings.HasPrefix(v, "unix://") && !strings.HasPrefix(v, "tcp://") {
			return "", fmt.Errorf("DOCKER_HOST=%s: the guard's proxy reaches engines over unix:// or tcp:// only", v)
		}
		return v, nil
	}
	if c := dockerContext(); c != "" && c != "default" {
		return "", fmt.Errorf("the Docker context %q chooses the engine, which the guard cannot follow: set DOCKER_HOST to its endpoint (docker context inspect %s --format '{{.Endpoints.docker.Host}}')", c, c)
	}
	cands := []string{"/var/run/docker.sock"}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		cands = append(cands, filepath.Join(x, "docker.sock"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(home, ".docker", "run", "docker.sock"), filepath.Join(home, ".docker", "desktop", "docker.sock"))
	}
	for _, p := range cands {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return "unix://" + p, nil
		}
	}
	return "", fmt.Errorf("%w: no DOCKER_HOST, and no engine socket at %s", backend.ErrUnreachable, strings.Join(cands, ", "))
}

// dockerContext is the Docker context the docker command line would use:
// DOCKER_CONTEXT, else the config file's currentContext.
func dockerContext() string {
	if v := os.Getenv("DOCKER_CONTEXT"); v != "" {
		return v
	}
	dir := configDir()
	if dir == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return ""
	}
	var cfg struct {
		CurrentContext string `json:"currentContext"`
	}
	if json.Unmarshal(b, &cfg) != nil {
		return ""
	}
	return cfg.CurrentContext
}

// proxyHook decides, for each create through the proxy, whether it is
// already someone's (a live run's labels, a keep-alive sandbox's mark: it
// goes as it came) or the guarded run's to admit and label. It keeps what
// it admitted, by name and id, so that what the engine no longer has is
// forgotten by the run: a name left in the ledger after the test removed
// its container would be removed by a sweep that goes by names (Node's)
// once another container has it, and counted in the run's fate.
type proxyHook struct {
	h   backend.GuardHook
	cli *client.Client

	// mu is held across the hook's calls that change the run (its ledger,
	// its watchdog), so that they come in the order the engine saw.
	mu    sync.Mutex
	runID string // the run's, from its first Admit
	// buildSince is when the run's first build began, by the engine's
	// clock (backend.LabelImageSince).
	buildSince string
	objs       map[string]map[string]*admit // by apiproxy kind, then name
}

// admit is a name the run admitted: listed in its ledger once, whatever
// the number of creates under it.
type admit struct {
	id      string        // the engine's, once created
	pending int           // its creates under way
	origin  origin.Origin // what made it, as it was admitted
}

func newProxyHook(h backend.GuardHook, cli *client.Client) *proxyHook {
	return &proxyHook{h: h, cli: cli, objs: map[string]map[string]*admit{apiproxy.KindContainer: {}, apiproxy.KindNetwork: {}, apiproxy.KindVolume: {}, apiproxy.KindImage: {}}}
}

// checkTimeout bounds the engine calls that check what a removal left.
const checkTimeout = 10 * time.Second

func (p *proxyHook) Admit(ctx context.Context, kind, name string, labels map[string]string) (map[string]string, string, error) {
	if why, marked := backend.KeepAliveWhy(name, labels); marked {
		return nil, "", nil
	} else if why != "" {
		return nil, "", fmt.Errorf("rightsize: the %s %s is not created: its name is a keep-alive sandbox's, which no run removes, and it carries no %s label, which every keep-alive sandbox has (without it no rightsize command removes it either): choose another name", kind, name, LabelReuse)
	}
	for _, k := range []string{LabelRunID, LabelRunIDAlt, backend.LabelImageRun} {
		if v := labels[k]; v != "" && p.h.Live(v) {
			return nil, "", nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.objs[kind][name]; name != "" && a != nil {
		a.pending++ // listed already
		return p.labels(kind, p.runID, name, a.origin), "", nil
	}
	runID, useName, o, err := p.h.Admit(ctx, proxyKind(kind), name)
	if err != nil {
		return nil, "", fmt.Errorf("rightsize: this %s cannot be guarded, so it is not created: %v", kind, err)
	}
	p.runID = runID
	if useName != "" {
		name = useName
	}
	if name != "" {
		p.objs[kind][name] = &admit{pending: 1, origin: o}
		if kind == apiproxy.KindImage {
			// A build is never answered as a create: its line stays
			// until the run removes, or the client prunes, what it built.
			p.objs[kind][name].pending = 0
		}
	}
	return p.labels(kind, runID, name, o), useName, nil
}

// labels are what a create of kind admitted as name into run runID, by
// the test o, carries: the run's and the test's, or, on an image, the
// run's image marks alone (its containers inherit its labels, and must
// not carry the run's, nor a test's, for that).
func (p *proxyHook) labels(kind, runID, name string, o origin.Origin) map[string]string {
	if kind == apiproxy.KindImage {
		l := map[string]string{backend.LabelImageRun: runID, backend.LabelImage: name}
		if p.buildSince == "" {
			p.buildSince = engineTime(context.Background(), p.cli)
		}
		if p.buildSince != "" {
			// When the run's first build began, by the engine's clock,
			// which stamps the images: a later build's cache shares the
			// parents an earlier one made. Without it, the build's
			// parents stay (never one from before the run's builds).
			l[backend.LabelImageSince] = p.buildSince
		}
		return l
	}
	return o.AddLabels(p.h.Labels(runID))
}

// Created tells the hook of the creates it admitted.
func (p *proxyHook) Created(kind, name, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.objs[kind][name]
	if a == nil {
		return
	}
	a.pending--
	if id != "" {
		a.id = id
		p.h.Created(proxyKind(kind), name, id)
	}
}

// Failed: a create the engine answered with a failure left nothing under
// that name, or something that is not the run's (the name was taken):
// either way the run's ledger must not go on naming it. One that got no
// answer may exist: it stays.
func (p *proxyHook) Failed(kind, name string, status int) {
	p.mu.Lock()
	a := p.objs[kind][name]
	check := false
	if a != nil {
		a.pending--
		check = status != 0 && a.pending == 0 && a.id == ""
	}
	p.mu.Unlock()
	if check {
		p.forgetGone(kind, name, a)
	}
}

// Removed checks, of what the run admitted of that kind and ref may name
// (its name, its id, an id prefix; anything when ref is ""), what the
// engine no longer has, and tells the hook.
func (p *proxyHook) Removed(kind, ref string) {
	type cand struct {
		name string
		a    *admit
	}
	var cands []cand
	p.mu.Lock()
	for name, a := range p.objs[kind] {
		if a.pending == 0 && (ref == "" || ref == name || ref == "/"+name || a.id != "" && strings.HasPrefix(a.id, ref)) {
			cands = append(cands, cand{name, a})
		}
	}
	p.mu.Unlock()
	for _, c := range cands {
		p.forgetGone(kind, c.name, c.a)
	}
}

// forgetGone tells the hook name is gone when the engine shows it is: no
// object has its id (or, before its create was answered, its name), or
// what has its name is not the run's.
func (p *proxyHook) forgetGone(kind, name string, a *admit) {
	p.mu.Lock()
	id, runID := a.id, p.runID
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	ref := id
	if ref == "" {
		ref = name
	}
	var realName string
	var labels map[string]string
	var err error
	if kind == apiproxy.KindImage {
		// Gone when no image carries its line's mark and the run's.
		var il client.ImageListResult
		if il, err = listImages(ctx, p.cli, backend.LabelImage+"="+name); err != nil {
			return
		}
		for _, im := range il.Items {
			if im.Labels[backend.LabelImage] == name && backend.ImageNotOwnedWhy(runID, im.Labels) == "" {
				return
			}
		}
		err = fmt.Errorf("image %s: %w", name, backend.ErrNotFound)
	} else if kind == apiproxy.KindVolume {
		var res client.VolumeInspectResult
		if res, err = p.cli.VolumeInspect(ctx, ref, client.VolumeInspectOptions{}); err == nil {
			realName, labels = res.Volume.Name, res.Volume.Labels
		}
	} else if kind == apiproxy.KindNetwork {
		var res client.NetworkInspectResult
		if res, err = p.cli.NetworkInspect(ctx, ref, client.NetworkInspectOptions{}); err == nil {
			realName, labels = res.Network.Name, res.Network.Labels
		}
	} else {
		var res client.ContainerInspectResult
		if res, err = p.cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{}); err == nil {
			realName = trimSlash(res.Container.Name)
			if res.Container.Config != nil {
				labels = res.Container.Config.Labels
			}
		}
	}
	switch {
	case err != nil && !errors.Is(err, backend.ErrNotFound) && !errors.Is(classify("inspect", err), backend.ErrNotFound):
		return // it may be there: the run keeps it
	case err == nil && (id != "" || backend.NotOwnedWhy(runID, realName, labels) == ""):
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.objs[kind][name] != a || a.pending > 0 || a.id != id {
		return // created again meanwhile
	}
	delete(p.objs[kind], name)
	p.h.Removed(proxyKind(kind), name)
}

func proxyKind(kind string) backend.Kind {
	switch kind {
	case apiproxy.KindNetwork:
		return backend.NetworkKind
	case apiproxy.KindVolume:
		return backend.VolumeKind
	case apiproxy.KindImage:
		return backend.ImageKind
	}
	return backend.SandboxKind
}
