package sandboxtest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// This file tests what Start and the Guard promise, against the real engine,
// and holds what the engine tests of the other files share: a rig that looks
// at the engine and the ledger from outside the package, a recording
// testing.TB, and the re-executed helper processes.

const (
	serverPort = "8080/tcp"
	serverBody = "rightsize-test-server port=8080\n"
	hostGW     = "host.docker.internal:host-gateway"
)

// serverSpec runs /server on 8080, published, ready once it listens.
func serverSpec(img string) sandboxtest.Spec {
	return sandboxtest.Spec{
		Image:      img,
		Cmd:        []string{testimage.ServerPath, "8080"},
		Ports:      []string{serverPort},
		WaitingFor: wait.ForListeningPort(serverPort).WithStartupTimeout(30 * time.Second),
	}
}

func TestStartLifecycle(t *testing.T) {
	img := testimage.Busybox(t)
	r := newRig(t)
	in := r.session()
	ctx := t.Context()

	g := sandboxtest.Start(t, serverSpec(img))
	name := g.Name()
	if want := regexp.MustCompile(`^rz-` + in.RunID + `-[0-9]+$`); !want.MatchString(name) {
		t.Fatalf("Name() = %q, want rz-%s-<n>", name, in.RunID)
	}

	l := r.lines(in.CacheDir, in.RunID)
	if !slices.Contains(l.sandboxes, name) {
		t.Errorf("while it runs, %s is not a line of %s.sandboxes (lines: %q)", name, in.RunID, l.sandboxes)
	}
	if !l.record {
		t.Errorf("while it runs, run %s has no record", in.RunID)
	}

	c, ok := r.inspect(name)
	if !ok {
		t.Fatalf("container %s does not exist after Start", name)
	}
	if !c.State.Running {
		t.Errorf("container %s is %s, want running", name, c.State.Status)
	}
	for _, k := range []string{docker.LabelRunID, docker.LabelRunIDAlt} {
		if got := c.Config.Labels[k]; got != in.RunID {
			t.Errorf("label %s = %q, want the run id %q", k, got, in.RunID)
		}
	}
	if _, ok := c.Config.Labels[docker.LabelReuse]; ok {
		t.Errorf("an ordinary sandbox carries %s", docker.LabelReuse)
	}
	if !slices.Contains(c.HostConfig.ExtraHosts, hostGW) {
		t.Errorf("ExtraHosts = %q, want %q among them", c.HostConfig.ExtraHosts, hostGW)
	}
	hostPort := r.loopbackOnly(c, serverPort)

	wantHost := "127.0.0.1"
	if h := os.Getenv(docker.EnvHostOverride); h != "" {
		wantHost = h
	}
	if got := g.Host(); got != wantHost {
		t.Errorf("Host() = %q, want %q", got, wantHost)
	}
	if got := g.MappedPort(serverPort); got != hostPort {
		t.Errorf("MappedPort(%q) = %q, the engine says %q", serverPort, got, hostPort)
	}
	if got := g.MappedPort("8080"); got != hostPort {
		t.Errorf("MappedPort(%q) = %q, the engine says %q", "8080", got, hostPort)
	}
	if body := httpGet(t, g.Endpoint(serverPort)); body != serverBody {
		t.Errorf("GET %s = %q, want %q", g.Endpoint(serverPort), body, serverBody)
	}
	proctest.WaitUntil(t, 10*time.Second, "Logs() to hold the server's \"ready\"", func() bool {
		return strings.Contains(g.Logs(), "ready")
	})

	if err := g.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, ok := r.inspect(name); ok {
		t.Errorf("container %s still exists after Stop", name)
	}
	l = r.lines(in.CacheDir, in.RunID)
	if slices.Contains(l.sandboxes, name) {
		t.Errorf("after Stop, %s is still a line of %s.sandboxes", name, in.RunID)
	}
	// Other tests of this process may have something live; when nothing
	// is, the run's files must be gone (TestStartHostOverride checks it in
	// a process of its own).
	if len(l.sandboxes) == 0 && len(l.networks) == 0 && (l.record || l.sandboxFile || l.networkFile) {
		t.Errorf("nothing is live in run %s, yet its files remain: %+v", in.RunID, l)
	}

	// A second Stop does nothing at all: a container that now has the
	// name (anyone's) must survive it.
	decoy := r.createDecoy(img, name)
	if err := g.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if c, ok := r.inspect(name); !ok || c.ID != decoy {
		t.Errorf("the second Stop touched the container now named %s", name)
	}
}

// TestStartHostOverride runs in a process of its own, as the backend
// reads TESTCONTAINERS_HOST_OVERRIDE once per process; that process also
// shows the run's files pruned once its only sandbox is stopped.
func TestStartHostOverride(t *testing.T) {
	t.Parallel()
	testimage.Busybox(t)
	h := startHelper(t, "host-override", t.TempDir(), docker.EnvHostOverride+"=localhost")
	if got := h.Expect("host"); got != "localhost" {
		t.Errorf("with %s=localhost, Host() = %q", docker.EnvHostOverride, got)
	}
	if got := h.Expect("body"); got != strconv.Quote(serverBody) {
		t.Errorf("GET through the overridden host = %s, want %q", got, serverBody)
	}
	if got := h.Expect("files-while-running"); !strings.Contains(got, ".sandboxes") || !strings.Contains(got, ledger.OwnRecordExt) {
		t.Errorf("while the sandbox runs, runs/ holds %q, want its record and line file", got)
	}
	if got := h.Expect("files-after-stop"); got != "" {
		t.Errorf("after its only sandbox stopped, runs/ still holds %q", got)
	}
	h.Finish()
}

func helperHostOverride(t *testing.T) {
	img := testimage.Busybox(t)
	g := sandboxtest.Start(t, serverSpec(img))
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("host", g.Host())
	proctest.Say("body", strconv.Quote(httpGet(t, g.Endpoint(serverPort))))
	runs := filepath.Join(in.CacheDir, ledger.RunsDir)
	proctest.Say("files-while-running", strings.Join(dirNames(t, runs), ","))
	if err := g.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	proctest.Say("files-after-stop", strings.Join(dirNames(t, runs), ","))
	proctest.Block()
}

func TestStartParallel(t *testing.T) {
	t.Parallel()
	img := testimage.Busybox(t)
	r := newRig(t)
	in := r.session()
	const n = 20
	var mu sync.Mutex
	var names []string
	t.Run("guards", func(t *testing.T) {
		for i := range n {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				r := newRig(t)
				g := sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{testimage.ServerPath}})
				c, ok := r.inspect(g.Name())
				if !ok || !c.State.Running {
					t.Fatalf("%s is not running after Start", g.Name())
				}
				if c.Config.Labels[docker.LabelRunID] != in.RunID {
					t.Errorf("%s: label %s = %q", g.Name(), docker.LabelRunID, c.Config.Labels[docker.LabelRunID])
				}
				if l := r.lines(in.CacheDir, in.RunID); !slices.Contains(l.sandboxes, g.Name()) {
					t.Errorf("%s is not a line of the ledger while it runs", g.Name())
				}
				mu.Lock()
				names = append(names, g.Name())
				mu.Unlock()
			})
		}
	})
	slices.Sort(names)
	if len(slices.Compact(slices.Clone(names))) != n {
		t.Fatalf("%d distinct names from %d guards: %q", len(slices.Compact(slices.Clone(names))), n, names)
	}
	l := r.lines(in.CacheDir, in.RunID)
	for _, name := range names {
		if slices.Contains(l.sandboxes, name) {
			t.Errorf("%s is still a line after its test ended", name)
		}
		if _, ok := r.inspect(name); ok {
			t.Errorf("container %s still exists after its test ended", name)
		}
	}
}

func TestStartMissingImage(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	in := r.session()
	const img = "rightsize-test/does-not-exist:nope"
	rec := &recordingTB{TB: t}
	start := time.Now()
	rec.run(func(tb testing.TB) {
		sandboxtest.Start(tb, sandboxtest.Spec{Image: img, Cmd: []string{"true"}})
		tb.Errorf("Start returned for an image that does not exist")
	})
	t.Logf("Start of a missing image failed in %s", time.Since(start).Round(time.Millisecond))

	if len(rec.fatals) != 1 {
		t.Fatalf("want one Fatalf, got %q (errors %q)", rec.fatals, rec.errors)
	}
	msg := rec.fatals[0]
	t.Logf("the message: %s", msg)
	for _, want := range []string{"sandboxtest: start " + img, "image " + img + " is not on the engine and could not be pulled"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure %q does not say %q", msg, want)
		}
	}
	if len(rec.errors) > 0 {
		t.Errorf("the cleanup reported %q", rec.errors)
	}
	name := regexp.MustCompile(`rz-` + in.RunID + `-[0-9]+`).FindString(msg)
	if name == "" {
		t.Fatalf("the failure does not name the sandbox rz-%s-<n>: %q", in.RunID, msg)
	}
	if _, ok := r.inspect(name); ok {
		t.Errorf("a container %s is left behind", name)
	}
	if l := r.lines(in.CacheDir, in.RunID); slices.Contains(l.sandboxes, name) {
		t.Errorf("%s is left in the ledger", name)
	}
}

// silentEngine listens on a unix socket of its own, accepts every
// connection and never answers on it: an engine that hangs. It returns its
// DOCKER_HOST.
func silentEngine(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "silent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read nor written
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "unix://" + sock
}

// halfSilentEngine answers like an engine until its first two /info
// calls have been answered, then hangs on every request: an engine that stops answering
// between the first question and the next (Podman 4.3, its storage held
// by a build, was seen to). It returns its DOCKER_HOST.
func halfSilentEngine(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "half.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	// The first two: DOCKER_HOST's check, then testcontainers-go's own
	// choice of engine; the third, which it asks to learn the engine's
	// socket, hangs.
	const answered = 2
	var infos atomic.Int32
	done := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping") && infos.Load() < answered:
			w.Header().Set("Api-Version", "1.41")
			io.WriteString(w, "OK")
			return
		case strings.HasSuffix(r.URL.Path, "/info") && infos.Add(1) <= answered:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"ID":"half-silent","ServerVersion":"20.10.24","OperatingSystem":"a test's engine","OSType":"linux"}`)
			return
		}
		select { // silent from now on
		case <-r.Context().Done():
		case <-done:
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() {
		close(done)
		srv.Close()
	})
	return "unix://" + sock
}

// TestStartResolutionErrors needs fresh processes: the backend is resolved
// once per process.
func TestStartResolutionErrors(t *testing.T) {
	t.Parallel()
	silent, halfSilent := silentEngine(t), halfSilentEngine(t)
	tests := []struct {
		name string
		env  []string
		want []string
		// slow: it waits out backend.ResolveTimeout, which -short does not.
		slow bool
	}{
		{
			name: "unknown backend",
			env:  []string{backend.EnvBackend + "=nonsense"},
			want: []string{`RIGHTSIZE_BACKEND="nonsense"`, "docker", "msb"},
		},
		{
			name: "no engine at DOCKER_HOST",
			env:  []string{"DOCKER_HOST=unix:///nonexistent.sock"},
			want: []string{"no sandbox engine answers", "/nonexistent.sock", "systemctl start docker", "DOCKER_HOST", backend.EnvBackend + "=msb"},
		},
		{
			name: "an engine that takes connections and never answers",
			env:  []string{"DOCKER_HOST=" + silent},
			want: []string{"no sandbox engine answers within " + backend.ResolveTimeout.String() + " (backend.ResolveTimeout)", strings.TrimPrefix(silent, "unix://")},
			slow: true,
		},
		{
			// testcontainers-go panics when the engine's info does not
			// come in time (MustExtractDockerSocket): a test's process
			// must get the failure, not the panic.
			name: "an engine that stops answering after its first answer",
			env:  []string{"DOCKER_HOST=" + halfSilent},
			want: []string{"no sandbox engine answers within " + backend.ResolveTimeout.String() + " (backend.ResolveTimeout)", "engine unreachable", "could not learn the engine's socket"},
			slow: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.slow && testing.Short() {
				t.Skip("waits out backend.ResolveTimeout (" + backend.ResolveTimeout.String() + "): not with -short")
			}
			h := startHelper(t, "resolve-error", t.TempDir(), tt.env...)
			// Far below any -timeout: the resolution must be bounded.
			h.Within = backend.ResolveTimeout + 30*time.Second
			msg, _ := strconv.Unquote(h.Expect("fatal"))
			t.Logf("the failure: %s", msg)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the failure %q does not say %q", msg, w)
				}
			}
			if got := h.Expect("files"); got != "" {
				t.Errorf("a failed resolution wrote %s", got)
			}
			h.Finish()
		})
	}
}

func helperResolveError(t *testing.T) {
	rec := &recordingTB{TB: t}
	rec.run(func(tb testing.TB) {
		sandboxtest.Start(tb, sandboxtest.Spec{Image: "rightsize-test/unused:none"})
	})
	if len(rec.fatals) != 1 {
		t.Fatalf("want one Fatalf, got %q", rec.fatals)
	}
	proctest.Say("fatal", strconv.Quote(rec.fatals[0]))
	proctest.Say("files", strings.Join(dirNames(t, os.Getenv(ledger.EnvCacheDir)), ","))
	proctest.Block()
}

// TestStopIgnoringTerm: a PID 1 that ignores SIGTERM (busybox sleep) is
// given the grace, then killed; how long that takes is the benchmark's.
func TestStopIgnoringTerm(t *testing.T) {
	t.Parallel()
	img := testimage.Busybox(t)
	r := newRig(t)
	g := sandboxtest.Start(t, sandboxtest.Spec{Image: img})
	id := g.Sandbox().ID()
	grace := backend.DefaultStopGrace
	if d, ok := t.Deadline(); ok {
		grace = min(grace, time.Until(d)/10)
	}
	since := time.Now().Add(-time.Second)
	if err := g.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, ok := r.inspect(g.Name()); ok {
		t.Fatalf("container %s still exists after Stop", g.Name())
	}
	evs := testimage.ContainerEvents(t, r.cli, id, since, time.Now())
	var term, die *events.Message
	for i, e := range evs {
		switch {
		case e.Action == events.ActionKill && term == nil && isSIGTERM(e):
			term = &evs[i]
		case e.Action == events.ActionDie:
			die = &evs[i]
		}
	}
	if term == nil || die == nil {
		t.Fatalf("want a SIGTERM, then a death: events %s", describeEvents(evs))
	}
	if code := testimage.ExitCode(*die); code != "137" {
		t.Errorf("the container died with exit code %s, want 137 (SIGKILL after the grace): %s", code, describeEvents(evs))
	}
	// A lower bound only: it may not be killed before the grace is over.
	if waited := time.Duration(die.TimeNano - term.TimeNano); waited < grace-100*time.Millisecond {
		t.Errorf("killed %s after SIGTERM, before the grace of %s was over", waited, grace)
	} else {
		t.Logf("SIGTERM → SIGKILL: %s (grace %s)", waited.Round(time.Millisecond), grace)
	}
}

// isSIGTERM reports whether a kill event is a SIGTERM. Docker names the
// signal; Podman 4.3 does not, and records no kill event for a forced
// removal, so the only kill it records of a stop is the stop's SIGTERM.
func isSIGTERM(e events.Message) bool {
	sig, ok := e.Actor.Attributes["signal"]
	return sig == "15" || sig == "SIGTERM" || !ok
}

// --- what the engine tests share ---

// rig looks at the engine and the ledger from outside the package.
type rig struct {
	t   testing.TB
	cli *client.Client
}

var (
	rigOnce sync.Once
	rigCli  *client.Client
	rigErr  error
)

func newRig(t testing.TB) *rig {
	t.Helper()
	testimage.Engine(t)
	rigOnce.Do(func() {
		d, err := docker.Open(context.Background())
		if err != nil {
			rigErr = err
			return
		}
		rigCli = d.Client()
	})
	if rigErr != nil {
		t.Fatalf("engine: %v", rigErr)
	}
	return &rig{t: t, cli: rigCli}
}

func (r *rig) session() sandboxtest.Info {
	r.t.Helper()
	in, err := sandboxtest.Session(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	return in
}

// inspect returns the container named name, and whether it exists.
func (r *rig) inspect(name string) (container.InspectResponse, bool) {
	r.t.Helper()
	res, err := r.cli.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	if err != nil {
		if notFound(err) {
			return container.InspectResponse{}, false
		}
		r.t.Fatalf("inspect %s: %v", name, err)
	}
	return res.Container, true
}

// notFound reports whether the engine said there is no such container or
// network, in either engine's words (Podman also says so with a 500 while
// another call removes it).
func notFound(err error) bool {
	return errors.Is(docker.Classify("", err), backend.ErrNotFound)
}

// inspectImage reports whether the engine has image ref.
func (r *rig) inspectImage(ref string) (string, bool) {
	r.t.Helper()
	res, err := r.cli.ImageInspect(context.Background(), ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", false
		}
		r.t.Fatalf("inspect image %s: %v", ref, err)
	}
	return res.ID, true
}

func (r *rig) running(name string) bool {
	r.t.Helper()
	c, ok := r.inspect(name)
	return ok && c.State != nil && c.State.Running
}

// networkExists reports whether the network exists, and the names of the
// containers attached to it.
func (r *rig) networkExists(name string) (bool, map[string]string, []string) {
	r.t.Helper()
	res, err := r.cli.NetworkInspect(context.Background(), name, client.NetworkInspectOptions{})
	if err != nil {
		if notFound(err) {
			return false, nil, nil
		}
		r.t.Fatalf("inspect network %s: %v", name, err)
	}
	var members []string
	for _, ep := range res.Network.Containers {
		members = append(members, ep.Name)
	}
	slices.Sort(members)
	return true, res.Network.Labels, members
}

// loopbackOnly checks that port is published, on 127.0.0.1 only, and
// returns its host port.
func (r *rig) loopbackOnly(c container.InspectResponse, port string) string {
	r.t.Helper()
	hostPort := ""
	for p, bs := range c.NetworkSettings.Ports {
		if p.String() != port {
			continue
		}
		for _, b := range bs {
			if b.HostIP.String() != "127.0.0.1" {
				r.t.Errorf("%s: %s is published on %s, want 127.0.0.1 only", c.Name, port, b.HostIP)
			}
			if hostPort == "" {
				hostPort = b.HostPort
			}
		}
	}
	for p, bs := range c.HostConfig.PortBindings {
		for _, b := range bs {
			if b.HostIP.String() != "127.0.0.1" {
				r.t.Errorf("%s: binding of %s asks for %s, want 127.0.0.1", c.Name, p, b.HostIP)
			}
		}
	}
	if hostPort == "" {
		r.t.Fatalf("%s does not publish %s: %v", c.Name, port, c.NetworkSettings.Ports)
	}
	return hostPort
}

// createDecoy creates (and does not start) a container named name, removed
// when the test ends; it returns its id.
func (r *rig) createDecoy(img, name string) string {
	r.t.Helper()
	res, err := r.cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{
		Name:   name,
		Config: &container.Config{Image: img, Labels: map[string]string{"dev.rightsize.test": "decoy"}},
	})
	if err != nil {
		r.t.Fatalf("create decoy %s: %v", name, err)
	}
	r.t.Cleanup(func() { r.remove(name) })
	return res.ID
}

// remove force-removes a container, for cleanups; gone already is fine.
func (r *rig) remove(name string) {
	_, err := r.cli.ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !notFound(err) {
		r.t.Errorf("remove %s: %v", name, err)
	}
}

// closeRun removes whatever carries run's label, for the cleanups of tests
// whose helper processes own sandboxes: what a test expects to be gone is
// checked before it runs.
func (r *rig) closeRun(run string) {
	r.t.Helper()
	if run == "" {
		return
	}
	r.t.Cleanup(func() {
		d, err := docker.Open(context.Background())
		if err != nil {
			r.t.Errorf("engine: %v", err)
			return
		}
		defer d.Close()
		if removed, err := d.CloseRun(context.Background(), run); err != nil {
			r.t.Errorf("close run %s: %v", run, err)
		} else if len(removed) > 0 {
			r.t.Logf("cleanup removed what run %s left: %q", run, removed)
		}
	})
}

func describeEvents(evs []events.Message) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "[%s %v] ", e.Action, e.Actor.Attributes["signal"]+e.Actor.Attributes["exitCode"])
	}
	return b.String()
}

// ledgerLines is what a run's files hold.
type ledgerLines struct {
	sandboxes, networks              []string
	record, sandboxFile, networkFile bool
}

func (r *rig) lines(cache, run string) ledgerLines {
	r.t.Helper()
	rec, sbx, nets := ledger.Paths(filepath.Join(cache, ledger.RunsDir), run)
	var l ledgerLines
	for _, f := range []struct {
		path string
		dst  *[]string
	}{{sbx, &l.sandboxes}, {nets, &l.networks}} {
		lf, err := ledger.ReadLines(f.path)
		if err != nil {
			r.t.Fatal(err)
		}
		*f.dst = lf.Names
	}
	own := ledger.OwnRecordPath(filepath.Join(cache, ledger.RunsDir), run)
	l.record, l.sandboxFile, l.networkFile = exists(rec) || exists(own), exists(sbx), exists(nets)
	return l
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// dirNames lists a folder's entries; a missing folder has none.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func httpGet(t testing.TB, hostPort string) string {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + hostPort + "/")
	if err != nil {
		t.Fatalf("GET http://%s/: %v", hostPort, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET http://%s/: %s %v", hostPort, resp.Status, err)
	}
	return string(b)
}

func nonce(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// recordingTB records what a call reports instead of failing the test, so
// that a test can look at the failure Start reports. Run the call with run.
type recordingTB struct {
	testing.TB
	mu       sync.Mutex
	fatals   []string
	errors   []string
	logs     []string
	cleanups []func()
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.add(&r.fatals, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *recordingTB) Fatal(args ...any) {
	r.add(&r.fatals, fmt.Sprint(args...))
	runtime.Goexit()
}

func (r *recordingTB) FailNow() {
	r.add(&r.fatals, "FailNow")
	runtime.Goexit()
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.add(&r.errors, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Error(args ...any)               { r.add(&r.errors, fmt.Sprint(args...)) }
func (r *recordingTB) Logf(format string, args ...any) { r.add(&r.logs, fmt.Sprintf(format, args...)) }
func (r *recordingTB) Log(args ...any)                 { r.add(&r.logs, fmt.Sprint(args...)) }

func (r *recordingTB) Cleanup(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, fn)
}

func (r *recordingTB) add(to *[]string, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*to = append(*to, s)
}

// run calls fn in a goroutine of its own, so that Fatalf can end it, then
// runs the cleanups it registered, last first.
func (r *recordingTB) run(fn func(tb testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	r.mu.Lock()
	cl := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cl) - 1; i >= 0; i-- {
		cl[i]()
	}
}

// --- helper processes: this test binary, re-executed ---

const envHelperRole = "RIGHTSIZE_TEST_GUARD_ROLE"

// helperRoles are what a re-executed test binary can be asked to do. Each
// reports with proctest.Say and, unless it is killed, ends when its stdin
// closes (proctest.Block).
var helperRoles = map[string]func(*testing.T){
	"host-override": helperHostOverride,
	"resolve-error": helperResolveError,
	"owner":         helperOwner,
	"sweeper":       helperSweeper,
	"reuse":         helperReuse,
	"keepalive":     helperKeepAlive,
	"ttl-sweeper":   helperTTLSweeper,
	"bench-first":   helperBenchFirst,
	"bench-suite":   helperBenchSuite,
	"first-start":   helperFirstStart,
	"process-alone": helperProcessAlone,
	"process-execs": helperProcessExecs,
	"volume-owner":  helperVolumeOwner,
	"sleep":         helperSleep,
}

// helperSleep is a local process that runs until it is ended, on every
// system (Windows has no sleep command): what a test hands StartProcess.
func helperSleep(*testing.T) { time.Sleep(10 * time.Minute) }

// sleeperCommand is a command of a process that runs until it is ended:
// this test binary as the helper role "sleep".
func sleeperCommand() *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestGuardHelper$", "-test.count=1", "-test.timeout=15m")
	cmd.Env = proctest.Environ(func(k string) bool { return strings.HasPrefix(k, "RIGHTSIZE_") }, envHelperRole+"=sleep")
	return cmd
}

// TestGuardHelper is the helper process's entry point; it does nothing in
// an ordinary run.
func TestGuardHelper(t *testing.T) {
	role := os.Getenv(envHelperRole)
	if role == "" {
		t.Skip("the helper process of the tests that re-execute this binary")
	}
	fn := helperRoles[role]
	if fn == nil {
		t.Fatalf("no helper role %q", role)
	}
	fn(t)
}

// startHelper re-executes this test binary as role, with cache as its
// RIGHTSIZE_CACHE_DIR, the RIGHTSIZE_ variables of this process dropped,
// a first-use sweep of 2 minutes' budget (a test that judges what a sweep
// did must not see it cut short on a loaded machine; env may set another),
// and env added. It is killed when the test ends, if it still runs.
func startHelper(t testing.TB, role, cache string, env ...string) *proctest.Helper {
	t.Helper()
	return startHelperArgs(t, role, cache, nil, env...)
}

// startHelperArgs is startHelper with more arguments for the test binary
// (-test.v, for a helper whose test log is read).
func startHelperArgs(t testing.TB, role, cache string, args []string, env ...string) *proctest.Helper {
	t.Helper()
	h := proctest.StartHelper(t, proctest.Spec{
		Name: "helper " + role,
		Argv: proctest.TestArgv("TestGuardHelper", append([]string{"-test.timeout=3m"}, args...)...),
		Env: proctest.Environ(
			func(k string) bool { return strings.HasPrefix(k, "RIGHTSIZE_") || k == docker.EnvHostOverride },
			append([]string{envHelperRole + "=" + role, "RIGHTSIZE_TEST_KEEP_ENV=1", ledger.EnvCacheDir + "=" + cache, reaper.EnvSweepBudget + "=2m"}, env...)...),
	})
	h.Within = 2 * time.Minute
	return h
}
