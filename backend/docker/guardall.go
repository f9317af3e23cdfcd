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

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/internal/apiproxy"
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
// through it with the run's labels after the hook admitted it.
type allGuard struct {
	px   *apiproxy.Proxy
	note string
	// saved is the environment before the guard, restored by Close.
	saved map[string]*string
	once  sync.Once
}

// startAllGuard finds the engine (without asking testcontainers-go, which
// would keep its answer for the life of the process), checks that it
// answers, starts the proxy on dir/docker.sock and points this process at
// it.
func startAllGuard(ctx context.Context, dir string, h backend.GuardHook) (backend.AllGuard, error) {
	if runtime.GOOS == "windows" {
		return nil, errors.New("guarding every create needs a unix socket for its proxy: not on Windows")
	}
	up, err := guardUpstream()
	if err != nil {
		return nil, err
	}
	cli, err := client.New(client.WithHost(up))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", backend.ErrUnreachable, up, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = cli.Ping(pctx, client.PingOptions{})
	cancel()
	cli.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", backend.ErrUnreachable, up, err)
	}
	px, err := apiproxy.Start(filepath.Join(dir, "docker.sock"), up, proxyHook{h})
	if err != nil {
		return nil, err
	}
	g := &allGuard{px: px, saved: map[string]*string{}}
	for _, k := range guardEnv {
		if v, ok := os.LookupEnv(k); ok {
			g.saved[k] = &v
		} else {
			g.saved[k] = nil
		}
	}
	os.Setenv("DOCKER_HOST", px.Addr())
	os.Unsetenv("DOCKER_CONTEXT")
	os.Setenv(EnvUpstream, up)
	if v := os.Getenv(envRyukDisabled); v != "true" {
		os.Setenv(envRyukDisabled, "true")
		g.note = "every container this test binary creates is guarded: testcontainers-go's Ryuk is turned off for it (" + envRyukDisabled + "=true), as the watchdog and the sweep remove them"
	}
	return g, nil
}

func (g *allGuard) Note() string { return g.note }

func (g *allGuard) Close() error {
	var err error
	g.once.Do(func() {
		err = g.px.Close()
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
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".docker")
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
// already someone's (a run's labels, a keep-alive mark: it goes as it
// came) or the guarded run's to admit and label.
type proxyHook struct{ h backend.GuardHook }

func (p proxyHook) Admit(ctx context.Context, kind, name string, labels map[string]string) (map[string]string, string, error) {
	if ownedAlready(labels) {
		return nil, "", nil
	}
	runID, useName, err := p.h.Admit(ctx, proxyKind(kind), name)
	if err != nil {
		return nil, "", fmt.Errorf("rightsize: this %s cannot be guarded, so it is not created: %v", kind, err)
	}
	return runLabels(runID), useName, nil
}

// Created tells the hook of every create, its own or not: the hook knows
// which names it admitted.
func (p proxyHook) Created(kind, name, id string) {
	if name != "" && id != "" {
		p.h.Created(proxyKind(kind), name, id)
	}
}

func (p proxyHook) Failed(kind, name string) {}

// ownedAlready: labels that say a run, or a keep-alive sandbox, owns what
// is being created (a Start of this process, which its ledger already
// holds; a child rightsize process's own; a keep-alive sandbox, which no
// run may own).
func ownedAlready(labels map[string]string) bool {
	for k := range labels {
		if k == LabelRunID || k == LabelRunIDAlt || k == LabelReuse || strings.HasPrefix(k, LabelReuse+".") {
			return true
		}
	}
	return false
}

func proxyKind(kind string) backend.Kind {
	if kind == apiproxy.KindNetwork {
		return backend.NetworkKind
	}
	return backend.SandboxKind
}
