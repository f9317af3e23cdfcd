package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/enginetest"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// Engine tests of the driver. Containers are made through the driver when
// that is what is tested, else with the API directly; every one is removed
// by its test's cleanup.

func init() {
	// Ryuk's image cannot be pulled where these tests run, and the driver
	// does not need it. testcontainers-go reads its configuration once, at
	// first use: this must come before any test.
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !ok {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

func openDocker(t testing.TB) *docker.Driver {
	t.Helper()
	testimage.Engine(t)
	d, err := docker.Open(context.Background())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// uniqueName is a container or network name of this test's own.
func uniqueName(t *testing.T, kind string) string {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "rz-dtest-" + kind + "-" + hex.EncodeToString(b[:])
}

// apiContainer creates a container with the API (started unless created is
// set), removed when the test ends.
func apiContainer(t *testing.T, d *docker.Driver, name string, started bool, cfg container.Config, hc container.HostConfig) string {
	t.Helper()
	ctx := context.Background()
	if cfg.Image == "" {
		cfg.Image = testimage.Busybox(t)
	}
	res, err := d.Client().ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: &cfg, HostConfig: &hc})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		d.Client().ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true})
	})
	if started {
		if _, err := d.Client().ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
	}
	return res.ID
}

// waitLogged waits up to 30 s for container id to print a line that is
// exactly line.
func waitLogged(t *testing.T, d *docker.Driver, id, line string) {
	t.Helper()
	var logs []byte
	if !proctest.Poll(30*time.Second, func() bool {
		rc, err := d.Client().ContainerLogs(context.Background(), id, client.ContainerLogsOptions{ShowStdout: true})
		if err != nil {
			return false
		}
		defer rc.Close()
		logs, _ = io.ReadAll(rc)
		// The log stream is multiplexed: each line is behind an 8-byte
		// header, so a line is found by its text and the newline after.
		return slices.ContainsFunc(strings.Split(string(logs), "\n"), func(l string) bool { return strings.HasSuffix(l, line) })
	}) {
		t.Fatalf("%s did not print %q within 30 s: %q", id, line, logs)
	}
}

func exists(t *testing.T, d *docker.Driver, name string) bool {
	t.Helper()
	ok, err := d.Exists(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestOpen(t *testing.T) {
	d := openDocker(t)
	if d.Name() != backend.Docker {
		t.Errorf("Name() = %q", d.Name())
	}
	if ep := d.Endpoint(); strings.HasPrefix(ep, "unix://") {
		p := strings.TrimPrefix(ep, "unix://")
		if r, err := filepath.EvalSymlinks(p); err != nil || r != p {
			t.Errorf("Endpoint() = %q is not the socket's canonical path (%q, %v)", ep, r, err)
		}
		want := "127.0.0.1"
		if h := os.Getenv(docker.EnvHostOverride); h != "" {
			want = h
		}
		if d.Host() != want {
			t.Errorf("local engine: Host() = %q, want %q", d.Host(), want)
		}
	}

	plan, err := d.Watchdog("1a2b3c4d")
	if err != nil {
		t.Fatalf("Watchdog: %v", err)
	}
	for _, kv := range []string{"DOCKER_HOST=" + d.DaemonHost(), "DOCKER_CONTEXT=", "RIGHTSIZE_BACKEND=docker"} {
		if !slices.Contains(plan.Env, kv) {
			t.Errorf("watchdog env %q lacks %q: its docker CLI could reach another engine", plan.Env, kv)
		}
	}
	if !d.DefaultEndpoint() && os.Getenv("DOCKER_HOST") == "" {
		t.Errorf("the engine reached with no configuration (%s) is not the default one", d.Endpoint())
	}
}

// A DOCKER_HOST that spells out the default socket, through a link or not,
// is the default engine: the other members' runs, which name no engine,
// are reaped through it (CI often sets DOCKER_HOST just so).
func TestDefaultEndpointSpelledOut(t *testing.T) {
	if _, err := os.Stat("/var/run/docker.sock"); err != nil {
		t.Skip("no engine on the default socket here")
	}
	for _, host := range []string{"unix:///var/run/docker.sock", "unix:///run/docker.sock"} {
		if _, err := os.Stat(strings.TrimPrefix(host, "unix://")); err != nil {
			continue
		}
		d, err := docker.OpenHost(host)
		if err != nil {
			t.Fatal(err)
		}
		if !d.DefaultEndpoint() {
			t.Errorf("DOCKER_HOST=%s: not the default engine (%s)", host, d.Endpoint())
		}
		d.Close()
	}
	d, err := docker.OpenHost("tcp://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.DefaultEndpoint() {
		t.Error("tcp://127.0.0.1:1 taken for the default engine")
	}
}

// TestOpenDockerHostDoesNotAnswer: testcontainers-go passes over a
// DOCKER_HOST that does not answer; the driver must not.
func TestOpenDockerHostDoesNotAnswer(t *testing.T) {
	working := openDocker(t).DaemonHost()

	t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock")
	d, err := docker.Open(context.Background())
	if err == nil {
		d.Close()
		t.Fatalf("DOCKER_HOST=unix:///nonexistent.sock: Open gave the engine at %s", d.DaemonHost())
	}
	if !errors.Is(err, backend.ErrUnreachable) {
		t.Errorf("the error %v does not wrap backend.ErrUnreachable", err)
	}
	wants := []string{"DOCKER_HOST=unix:///nonexistent.sock"}
	if fi, err := os.Stat("/var/run/docker.sock"); runtime.GOOS != "windows" && err == nil && fi.Mode()&os.ModeSocket != 0 {
		wants = append(wants, "unset DOCKER_HOST") // the hint, where a default socket is there to use
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}

	t.Setenv("DOCKER_HOST", working)
	d, err = docker.Open(context.Background())
	if err != nil {
		t.Fatalf("DOCKER_HOST=%s: %v", working, err)
	}
	d.Close()
}

func TestCreateWith(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	img := testimage.Busybox(t)
	ctx := context.Background()
	name := uniqueName(t, "create")
	t.Cleanup(func() { d.ForceRemove(context.Background(), name) })
	sbx, err := d.Create(ctx, name, backend.Spec{
		Image:         img,
		Cmd:           []string{"sh", "-c", `cat /etc/rz/greeting; echo "env=$RZ_ENV"; exec /server 8080`},
		Env:           map[string]string{"RZ_ENV": "set"},
		Ports:         []string{"8080/tcp"},
		Labels:        map[string]string{"user.label": "kept"},
		RunID:         "dtest",
		MemoryLimitMB: 64,
		Files:         []backend.File{{GuestPath: "/etc/rz/greeting", Content: []byte("hello from a file\n")}},
		WaitingFor:    wait.ForLog("ready").WithPollInterval(10 * time.Millisecond),
		Customize:     []testcontainers.ContainerCustomizer{testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.ShmSize = 32 << 20 })},
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	res, err := d.Client().ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Container
	if sbx.ID() != c.ID || sbx.Name() != name {
		t.Errorf("sandbox %s %s, container %s %s", sbx.Name(), sbx.ID(), c.Name, c.ID)
	}
	if c.Config.Labels[docker.LabelRunID] != "dtest" || c.Config.Labels[docker.LabelRunIDAlt] != "dtest" || c.Config.Labels["user.label"] != "kept" {
		t.Errorf("labels %v: want both spellings of the run label, and the user's", c.Config.Labels)
	}
	if why := cannotLimit(t, d); why != "" {
		t.Logf("memory limit %d not checked: %s", c.HostConfig.Memory, why)
	} else if c.HostConfig.Memory != 64<<20 {
		t.Errorf("memory limit %d, want 64 MiB", c.HostConfig.Memory)
	}
	if c.HostConfig.ShmSize != 32<<20 {
		t.Errorf("the request's own host config modifier was lost: shm size %d", c.HostConfig.ShmSize)
	}
	if !slices.Contains(c.HostConfig.ExtraHosts, "host.docker.internal:host-gateway") {
		t.Errorf("ExtraHosts %q", c.HostConfig.ExtraHosts)
	}
	for p, bs := range c.NetworkSettings.Ports {
		for _, b := range bs {
			if b.HostIP != netip.MustParseAddr("127.0.0.1") {
				t.Errorf("%s published on %s, want 127.0.0.1 only", p, b.HostIP)
			}
		}
	}
	logs, err := sbx.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"hello from a file", "env=set", "ready"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs %q lack %q", logs, want)
		}
	}
	port, err := sbx.MappedPort(ctx, "8080")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + net.JoinHostPort(sbx.Host(), port) + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "rightsize-test-server port=8080\n" {
		t.Errorf("GET = %q", body)
	}
	if err := sbx.Stop(ctx, time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if exists(t, d, name) {
		t.Errorf("%s exists after Stop", name)
	}
}

// An image's own EXPOSEd ports are published by testcontainers-go when the
// spec names none: they too must be on loopback only.
func TestImagePortsOnLoopback(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	ctx := context.Background()
	base := uniqueName(t, "exposer")
	apiContainer(t, d, base, false, container.Config{}, container.HostConfig{})
	ref := "rightsize-test/exposes:" + strings.TrimPrefix(base, "rz-dtest-exposer-")
	// Podman's commit reads a configuration from the body and fails on an
	// empty one ("Decode(): EOF"); an empty configuration changes nothing
	// on either engine.
	if _, err := d.Client().ContainerCommit(ctx, base, client.ContainerCommitOptions{Reference: ref, Changes: []string{"EXPOSE 8080/tcp"}, Config: &container.Config{}}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	t.Cleanup(func() { d.Client().ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}) })

	name := uniqueName(t, "imgports")
	t.Cleanup(func() { d.ForceRemove(context.Background(), name) })
	if _, err := d.Create(ctx, name, backend.Spec{Image: ref, Cmd: []string{"/server", "8080"}, RunID: "dtest"}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	res, err := d.Client().ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bs := res.Container.HostConfig.PortBindings[network.MustParsePort("8080/tcp")]
	if len(bs) == 0 {
		t.Fatalf("the image's port 8080 is not published at all: %v", res.Container.HostConfig.PortBindings)
	}
	for _, b := range bs {
		if b.HostIP != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("the image's port 8080 is bound on %v, want 127.0.0.1 only", b.HostIP)
		}
	}
}

func TestCreateMissingImage(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	name := uniqueName(t, "missing")
	t.Cleanup(func() { d.ForceRemove(context.Background(), name) })
	const img = "rightsize-test/does-not-exist:nope"
	_, err := d.Create(context.Background(), name, backend.Spec{Image: img})
	if err == nil {
		t.Fatal("Create of an image that does not exist succeeded")
	}
	if want := "image " + img + " is not on the engine and could not be pulled"; !strings.Contains(err.Error(), want) {
		t.Errorf("the error %q does not say %q", err, want)
	}
	if exists(t, d, name) {
		t.Errorf("a container %s is left", name)
	}
}

func TestStopGrace(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	ctx := context.Background()
	t.Run("PID 1 ignores SIGTERM", func(t *testing.T) {
		t.Parallel()
		name := uniqueName(t, "stop")
		apiContainer(t, d, name, true, container.Config{}, container.HostConfig{}) // busybox sleep 3600
		const grace = 300 * time.Millisecond
		start := time.Now()
		if err := d.Stop(ctx, name, grace); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if took := time.Since(start); took < grace {
			t.Errorf("Stop returned after %s, before the grace of %s was over", took, grace)
		}
		if exists(t, d, name) {
			t.Errorf("%s exists after Stop", name)
		}
		if err := d.Stop(ctx, name, grace); err != nil {
			t.Errorf("Stop of a container already gone: %v", err)
		}
	})
	t.Run("PID 1 ends on SIGTERM", func(t *testing.T) {
		t.Parallel()
		name := uniqueName(t, "stop")
		id := apiContainer(t, d, name, true, container.Config{Cmd: []string{testimage.ServerPath}}, container.HostConfig{})
		// Its SIGTERM handling is what is tested: a SIGTERM that comes
		// before the program has set it up ends it by the signal.
		waitLogged(t, d, id, "ready")
		since := time.Now().Add(-time.Second)
		if err := d.Stop(ctx, name, time.Minute); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if exists(t, d, name) {
			t.Errorf("%s exists after Stop", name)
		}
		code := ""
		for _, e := range testimage.ContainerEvents(t, d.Client(), id, since, time.Now()) {
			if e.Action == events.ActionDie {
				code = testimage.ExitCode(e)
			}
		}
		if code != "0" {
			t.Errorf("/server died with exit code %q, want 0: it ends by itself on SIGTERM", code)
		}
	})
	t.Run("not running", func(t *testing.T) {
		t.Parallel()
		name := uniqueName(t, "stop")
		apiContainer(t, d, name, false, container.Config{}, container.HostConfig{})
		if err := d.Stop(ctx, name, time.Minute); err != nil {
			t.Fatalf("Stop of a created container: %v", err)
		}
		if exists(t, d, name) {
			t.Errorf("%s exists after Stop", name)
		}
	})
}

// Remove removes only what the engine shows as the run's: anything else
// that answers to a listed name is left running, whatever the list says.
func TestRemoveOwnership(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	ctx := context.Background()
	var rb [6]byte
	if _, err := rand.Read(rb[:]); err != nil {
		t.Fatal(err)
	}
	run := "r" + hex.EncodeToString(rb[:]) // 13 characters
	missing := uniqueName(t, "missing")
	ours := uniqueName(t, "ours")
	oursAlt := uniqueName(t, "oursalt")
	stranger := uniqueName(t, "stranger")
	otherRun := uniqueName(t, "otherrun")
	keep := "rz-reuse-" + run[1:13]
	labelled := func(l map[string]string) container.Config { return container.Config{Labels: l} }
	apiContainer(t, d, ours, true, labelled(map[string]string{docker.LabelRunID: run}), container.HostConfig{})
	apiContainer(t, d, oursAlt, false, labelled(map[string]string{docker.LabelRunIDAlt: run}), container.HostConfig{})
	strangerID := apiContainer(t, d, stranger, true, container.Config{}, container.HostConfig{})
	apiContainer(t, d, otherRun, true, labelled(map[string]string{docker.LabelRunID: "someoneelse"}), container.HostConfig{})
	apiContainer(t, d, keep, true, labelled(map[string]string{docker.LabelReuse: run[1:13], docker.LabelRunID: run}), container.HostConfig{})

	list := []string{ours, oursAlt, missing, stranger, strangerID[:12], otherRun, keep}
	errs := d.Remove(ctx, backend.SandboxKind, run, list)
	want := []error{nil, nil, backend.ErrNotFound, backend.ErrNotOwned, backend.ErrNotOwned, backend.ErrNotOwned, backend.ErrNotOwned}
	for i, n := range list {
		if (want[i] == nil) != (errs[i] == nil) || (want[i] != nil && !errors.Is(errs[i], want[i])) {
			t.Errorf("Remove %s: %v, want %v", n, errs[i], want[i])
		}
	}
	for _, n := range []string{stranger, otherRun, keep} {
		if !exists(t, d, n) {
			t.Errorf("%s was removed though it is not the run's", n)
		}
	}
	for _, n := range []string{ours, oursAlt} {
		if exists(t, d, n) {
			t.Errorf("%s, the run's, is still there", n)
		}
	}
	if !strings.Contains(errs[3].Error(), "no rightsize run label") || !strings.Contains(errs[6].Error(), "keep-alive") {
		t.Errorf("the reasons do not say why: %v; %v", errs[3], errs[6])
	}
	if errs := d.Remove(ctx, backend.SandboxKind, "", []string{stranger}); errs[0] == nil || !exists(t, d, stranger) {
		t.Error("Remove without a run id removed something")
	}

	// Networks: labelled as the run's, or not; and one still in use.
	net, strangerNet := uniqueName(t, "net"), uniqueName(t, "snet")
	netID, err := d.CreateNetwork(ctx, net, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.ForceRemoveNetwork(context.Background(), net) })
	if _, err := d.Client().NetworkCreate(ctx, strangerNet, client.NetworkCreateOptions{Driver: "bridge"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.ForceRemoveNetwork(context.Background(), strangerNet) })
	member := uniqueName(t, "member")
	apiContainer(t, d, member, true, container.Config{}, container.HostConfig{NetworkMode: container.NetworkMode(net)})
	errs = d.Remove(ctx, backend.NetworkKind, run, []string{net, strangerNet, missing})
	if !errors.Is(errs[0], backend.ErrInUse) || !errors.Is(errs[1], backend.ErrNotOwned) || !errors.Is(errs[2], backend.ErrNotFound) {
		t.Errorf("Remove networks [in use, not the run's, missing] = %v", errs)
	}
	d.ForceRemove(ctx, member)
	if err := d.Remove(ctx, backend.NetworkKind, run, []string{netID[:12]})[0]; err != nil {
		t.Errorf("remove the run's network by its short id once empty: %v", err)
	}
}

// ListRun and CloseRun find either spelling of the run label, and nothing
// of another run nor any keep-alive container.
func TestCloseRun(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	ctx := context.Background()
	run, other := uniqueName(t, "run"), uniqueName(t, "run")
	a, b, c, k := uniqueName(t, "a"), uniqueName(t, "b"), uniqueName(t, "c"), uniqueName(t, "k")
	ida := apiContainer(t, d, a, true, container.Config{Labels: map[string]string{docker.LabelRunID: run}}, container.HostConfig{})
	idb := apiContainer(t, d, b, false, container.Config{Labels: map[string]string{docker.LabelRunIDAlt: run}}, container.HostConfig{})
	apiContainer(t, d, c, true, container.Config{Labels: map[string]string{docker.LabelRunID: other, docker.LabelRunIDAlt: other}}, container.HostConfig{})
	apiContainer(t, d, k, true, container.Config{Labels: map[string]string{docker.LabelRunID: run, docker.LabelReuse: "abcdefabcdef"}}, container.HostConfig{})
	net := uniqueName(t, "net")
	netID, err := d.CreateNetwork(ctx, net, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.ForceRemoveNetwork(context.Background(), net) })

	cs, err := d.ListRun(ctx, backend.SandboxKind, run)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := d.ListRun(ctx, backend.NetworkKind, run)
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(slices.Values([]string{ida, idb})); !slices.Equal(cs, want) || !slices.Equal(ns, []string{netID}) {
		t.Errorf("ListRun = %q, %q; want %q, %q", cs, ns, want, []string{netID})
	}
	removed, err := d.CloseRun(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 3 {
		t.Errorf("CloseRun removed %q, want 2 containers and a network", removed)
	}
	if exists(t, d, a) || exists(t, d, b) {
		t.Errorf("a container of the run is left")
	}
	if !exists(t, d, c) || !exists(t, d, k) {
		t.Errorf("CloseRun removed %s (another run's) or %s (a keep-alive one)", c, k)
	}
}

func TestAdopt(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	ctx := context.Background()
	if _, err := d.Adopt(ctx, uniqueName(t, "missing")); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("adopt a container that does not exist: %v, want ErrNotFound", err)
	}
	stopped := uniqueName(t, "stopped")
	apiContainer(t, d, stopped, false, container.Config{}, container.HostConfig{})
	if _, err := d.Adopt(ctx, stopped); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("adopt a container that does not run: %v, want ErrNotFound", err)
	}
	running := uniqueName(t, "running")
	id := apiContainer(t, d, running, true, container.Config{}, container.HostConfig{})
	s, err := d.Adopt(ctx, running)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != running || s.ID() != id {
		t.Errorf("adopted %s %s, want %s %s", s.Name(), s.ID(), running, id)
	}
}

// TestMappedPort: a port published on both address families may get a host
// port for each; MappedPort gives the IPv4 one, which a host name or
// 127.0.0.1 reaches.
func TestMappedPort(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	ctx := context.Background()
	p4, p6 := freePort(t), freePort(t)
	name := uniqueName(t, "ports")
	apiContainer(t, d, name, true, container.Config{
		Cmd:          []string{testimage.ServerPath},
		ExposedPorts: network.PortSet{network.MustParsePort("8080/tcp"): {}},
	}, container.HostConfig{PortBindings: network.PortMap{network.MustParsePort("8080/tcp"): {
		{HostIP: netip.IPv6Unspecified(), HostPort: p6},
		{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: p4},
	}}})
	s := d.SandboxFor(name)
	for _, port := range []string{"8080/tcp", "8080"} {
		got, err := s.MappedPort(ctx, port)
		if err != nil {
			t.Fatalf("MappedPort(%q): %v", port, err)
		}
		if got != p4 {
			t.Errorf("MappedPort(%q) = %s, want the IPv4 binding's %s (not the IPv6 %s)", port, got, p4, p6)
		}
	}
	for _, port := range []string{"8080/udp", "9090", "not-a-port"} {
		if got, err := s.MappedPort(ctx, port); err == nil {
			t.Errorf("MappedPort(%q) = %s, want an error", port, got)
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// cannotLimit says why the engine sets no resource limits, "" when it
// does: rootless Podman on cgroup v1 accepts a memory limit and drops it
// (it cannot delegate cgroups to an unprivileged user).
func cannotLimit(t *testing.T, d *docker.Driver) string {
	t.Helper()
	res, err := d.Client().Info(context.Background(), client.InfoOptions{})
	if err != nil {
		t.Fatalf("engine info: %v", err)
	}
	// Docker lists "name=rootless"; Podman's compatible answer does not,
	// and a user other than root reaches a rootless Podman.
	rootless := slices.ContainsFunc(res.Info.SecurityOptions, func(o string) bool { return strings.Contains(o, "rootless") }) ||
		os.Getuid() != 0 && d.IsPodman()
	if rootless && res.Info.CgroupVersion == "1" {
		return "a rootless engine on cgroup v1 applies no resource limits"
	}
	return ""
}

// envFlakyHelper makes TestOpenDockerHostFailedFirstLook the process it
// starts: a fresh one, as testcontainers-go chooses its engine once per
// process.
const envFlakyHelper = "RZ_TEST_FLAKY_DOCKER_HOST_HELPER"

// TestOpenDockerHostFailedFirstLook: a DOCKER_HOST that failed
// testcontainers-go's first look (which then took the default socket for
// the whole process) and answers by the time the driver asks is refused:
// every container of the process would otherwise be made on an engine the
// user did not name. (The chaos harness found it: a fault proxy as
// DOCKER_HOST that dropped the first request had owners' sandboxes made
// past it, on the default engine.)
func TestOpenDockerHostFailedFirstLook(t *testing.T) {
	if os.Getenv(envFlakyHelper) == "1" {
		d, err := docker.Open(context.Background())
		if err != nil {
			fmt.Println("open error:", err)
			return
		}
		fmt.Println("opened:", d.DaemonHost())
		d.Close()
		return
	}
	engine, ok := strings.CutPrefix(openDocker(t).DaemonHost(), "unix://")
	if !ok {
		t.Skip("the engine is not on a unix socket here")
	}
	sock := filepath.Join(t.TempDir(), "flaky.sock")
	failed := enginetest.FailLook(t, sock, engine)
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenDockerHostFailedFirstLook$", "-test.count=1")
	cmd.Env = append(os.Environ(), envFlakyHelper+"=1", "DOCKER_HOST=unix://"+sock)
	out, _ := cmd.CombinedOutput()
	if !failed.Load() {
		t.Fatalf("the proxy never failed a look at the engine (info); the helper said:\n%s", out)
	}
	if !strings.Contains(string(out), "open error:") || !strings.Contains(string(out), "did not answer testcontainers-go's first look") {
		t.Errorf("DOCKER_HOST failed testcontainers-go's first look, then answered: Open must refuse the engine testcontainers-go took instead; the helper said:\n%s", out)
	}
}
