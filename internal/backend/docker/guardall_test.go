package docker_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// Engine tests of the guard of every create: the real proxy in front of
// the real engine, with a hook that stands for the run (it records what it
// is told, and names what it admits). What they create carries a label of
// the test's, by which the cleanup removes it all straight through the
// engine.

// guardTag marks what these tests make; its value is the test's.
const guardTag = "dev.rightsize.test.guard"

// guardMark is the mark the hook adds to the run's labels.
const guardMark = "dev.rightsize.test.guard-mark"

// guardRec is the run a guard works for: it records what it is told.
type guardRec struct {
	run  string
	live []string // run ids that Live calls live

	mu      sync.Mutex
	seq     int
	admits  []string // "kind name"
	created []string // "kind name id"
	removed []string // "kind name"
}

func (g *guardRec) Admit(_ context.Context, k backend.Kind, name string) (string, string, origin.Origin, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.admits = append(g.admits, k.String()+" "+name)
	use := ""
	if name == "" {
		g.seq++
		use = fmt.Sprintf("rz-%s-%d", g.run, g.seq)
		if k == backend.NetworkKind {
			use = fmt.Sprintf("rz-net-%s%d", g.run[:6], g.seq)
		}
	}
	// What made it, as the run's hook would say: a test and a place of
	// the name's own, so that each create's labels can be told apart.
	return g.run, use, origin.Origin{Test: "TestOf/" + cmp.Or(use, name), Place: "made_test.go:7"}, nil
}

func (g *guardRec) Created(k backend.Kind, name, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.created = append(g.created, k.String()+" "+name+" "+id)
}

func (g *guardRec) Removed(k backend.Kind, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removed = append(g.removed, k.String()+" "+name)
}

func (g *guardRec) Live(runID string) bool { return slices.Contains(g.live, runID) }

// Labels are the run's, and a mark of the test's: the proxy puts on what
// the hook says, not labels of its own.
func (g *guardRec) Labels(runID string) map[string]string {
	return map[string]string{docker.LabelRunID: runID, docker.LabelRunIDAlt: runID, guardMark: runID}
}

func (g *guardRec) seen() (admits, created, removed []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.admits), slices.Clone(g.created), slices.Clone(g.removed)
}

// guardRig is a guard in front of the engine, and clients of both.
type guardRig struct {
	t      testing.TB
	img    string
	tag    string
	hook   *guardRec
	addr   string         // the guard's DOCKER_HOST
	direct *client.Client // the engine
	cli    *client.Client // through the guard
	podman bool
}

func newGuardRig(t testing.TB) *guardRig {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("GuardAll is not offered on Windows: its proxy listens on a unix socket (startAllGuard)")
	}
	d := openDocker(t)
	img := testimage.Busybox(t)
	var b [4]byte
	rand.Read(b[:])
	r := &guardRig{t: t, img: img, tag: hex.EncodeToString(b[:]), direct: d.Client(), podman: d.IsPodman()}
	r.hook = &guardRec{run: r.tag}
	dir, err := os.MkdirTemp("", "rzg") // short: a socket's path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Cleanup(r.cleanup) // after the guard stopped
	addr, stop, err := docker.StartGuard(context.Background(), d.DaemonHost(), dir, r.hook)
	if err != nil {
		t.Fatalf("StartGuard: %v", err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop the guard: %v", err)
		}
	})
	r.addr = addr
	if r.cli, err = client.New(client.WithHost(addr)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cli.Close() })
	return r
}

// name is a name of the test's own.
func (r *guardRig) name(s string) string { return "rz-gtest-" + r.tag + "-" + s }

// labels are the test's tag and more.
func (r *guardRig) labels(kv ...string) map[string]string {
	m := map[string]string{guardTag: r.tag}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// cleanup removes, through the engine, whatever carries the test's tag.
func (r *guardRig) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := client.Filters{}.Add("label", guardTag+"="+r.tag)
	if cs, err := r.direct.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cs.Items {
			r.direct.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	if ns, err := r.direct.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range ns.Items {
			r.direct.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		}
	}
}

// create creates a container through the guard.
func (r *guardRig) create(name string, labels map[string]string) (string, error) {
	res, err := r.cli.ContainerCreate(r.t.Context(), client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: r.img, Cmd: []string{"sleep", "60"}, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	return res.ID, err
}

// labelsOf are the labels the engine shows on container ref.
func (r *guardRig) labelsOf(ref string) map[string]string {
	r.t.Helper()
	res, err := r.direct.ContainerInspect(r.t.Context(), ref, client.ContainerInspectOptions{})
	if err != nil {
		r.t.Fatalf("inspect %s: %v", ref, err)
	}
	return res.Container.Config.Labels
}

// TestGuardAllLabelValues: a create passes unguarded only when its run
// label names a live run, or it carries the keep-alive label; a bare
// label key, an empty or a dead run's value, or rightsize-go's extra
// keep-alive mark alone, is admitted and labelled with the guarded run.
func TestGuardAllLabelValues(t *testing.T) {
	r := newGuardRig(t)
	const liveRun, deadRun = "1a2b3c4d", "deadbeef"
	r.hook.live = []string{liveRun}
	for _, tc := range []struct {
		name    string
		labels  []string
		guarded bool
		reason  string
	}{
		{"empty-run", []string{docker.LabelRunID, ""}, true, "an empty run id names no run"},
		{"empty-alt", []string{docker.LabelRunIDAlt, ""}, true, "an empty run id names no run"},
		{"dead-run", []string{docker.LabelRunID, deadRun}, true, "a run that is not live in the ledger owns nothing"},
		{"extra-mark", []string{docker.LabelReuseExtra, "x"}, true, "rightsize-go's extra mark alone is no keep-alive"},
		{"live-run", []string{docker.LabelRunIDAlt, liveRun}, false, "a live run's create is in its own ledger"},
		{"keep-alive", []string{docker.LabelReuse, "0123456789ab"}, false, "a keep-alive sandbox is no run's"},
		{"keep-alive-empty", []string{docker.LabelReuse, ""}, false, "the keep-alive label makes a keep-alive whatever its value"},
	} {
		name := r.name(tc.name)
		if _, err := r.create(name, r.labels(tc.labels...)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := r.labelsOf(name)
		admits, _, _ := r.hook.seen()
		admitted := slices.Contains(admits, "sandbox "+name)
		if tc.guarded {
			if !admitted || got[docker.LabelRunID] != r.hook.run || got[docker.LabelRunIDAlt] != r.hook.run || got[guardMark] != r.hook.run {
				t.Errorf("%s (%s): admitted %v, labels %v; want it admitted and labelled with run %s and the hook's mark", tc.name, tc.reason, admitted, got, r.hook.run)
			}
			continue
		}
		if admitted || got[docker.LabelRunID] == r.hook.run || got[docker.LabelRunIDAlt] == r.hook.run {
			t.Errorf("%s (%s): admitted %v, labels %v; want it as it came", tc.name, tc.reason, admitted, got)
		}
	}
}

// TestGuardAllOrigin: what the guard admits carries, beside the run's
// labels, what made it as the run's hook said (the test that was making
// it as it came in): a container and a network, named or not.
func TestGuardAllOrigin(t *testing.T) {
	r := newGuardRig(t)
	want := func(name string) map[string]string {
		return map[string]string{origin.LabelTest: "TestOf/" + name, origin.LabelPlace: "made_test.go:7"}
	}
	check := func(what string, got, want map[string]string) {
		t.Helper()
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: label %s = %q, want %q (labels %v)", what, k, got[k], v, got)
			}
		}
	}
	name := r.name("origin")
	if _, err := r.create(name, r.labels()); err != nil {
		t.Fatal(err)
	}
	check("a named container", r.labelsOf(name), want(name))
	id, err := r.create("", r.labels())
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.direct.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("an unnamed container", res.Container.Config.Labels, want(strings.TrimPrefix(res.Container.Name, "/")))
	net := r.name("onet")
	if _, err := r.cli.NetworkCreate(t.Context(), net, client.NetworkCreateOptions{Internal: true, Labels: r.labels()}); err != nil {
		t.Fatal(err)
	}
	nres, err := r.direct.NetworkInspect(t.Context(), net, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("a network", nres.Network.Labels, want(net))
}

// TestGuardAllKeepAliveName: a container or network named as a keep-alive
// sandbox without the keep-alive label is refused, with a reason: no
// run's close removes it (its name says keep-alive), and no keep-alive
// command either (its labels do not). With the label it passes as it came.
func TestGuardAllKeepAliveName(t *testing.T) {
	r := newGuardRig(t)
	name := backend.KeepAlivePrefix + r.tag + "abcd"
	if _, err := r.create(name, r.labels()); err == nil || !strings.Contains(err.Error(), "keep-alive") || !strings.Contains(err.Error(), docker.LabelReuse) {
		t.Errorf("a create of %s without the keep-alive label: %v, want a refusal that names the label", name, err)
	}
	if _, err := r.direct.ContainerInspect(t.Context(), name, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the refused %s reached the engine: %v", name, err)
	}
	if _, err := r.cli.NetworkCreate(t.Context(), name, client.NetworkCreateOptions{Internal: true, Labels: r.labels()}); err == nil || !strings.Contains(err.Error(), "keep-alive") {
		t.Errorf("a network create of %s without the keep-alive label: %v, want a refusal", name, err)
	}
	if _, err := r.direct.NetworkInspect(t.Context(), name, client.NetworkInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the refused network %s reached the engine: %v", name, err)
	}
	if admits, _, _ := r.hook.seen(); len(admits) > 0 {
		t.Errorf("admits %q, want none", admits)
	}
	if _, err := r.create(name, r.labels(docker.LabelReuse, r.tag+"abcd")); err != nil {
		t.Fatalf("a keep-alive create with its label: %v", err)
	}
	if got := r.labelsOf(name); got[docker.LabelRunID] != "" {
		t.Errorf("a keep-alive sandbox was given run labels: %v", got)
	}
}

// TestGuardAllForgetsRemoved: what the run admitted and the engine then
// removed (by name, by id, by an id prefix, a prune, a wait for an
// automatic removal) is told to the hook, once the engine shows it gone;
// a removal the engine refused, and a removal of what the run did not
// admit, are not. A create the engine refused because the name is
// another's is forgotten too: the run's ledger must not name that one.
func TestGuardAllForgetsRemoved(t *testing.T) {
	r := newGuardRig(t)
	ctx := t.Context()
	mustCreate := func(name string) string {
		t.Helper()
		id, err := r.create(name, r.labels())
		if err != nil {
			t.Fatalf("create %q: %v", name, err)
		}
		return id
	}
	byName, byID, byPrefix := r.name("by-name"), r.name("by-id"), r.name("by-prefix")
	mustCreate(byName)
	idByID := mustCreate(byID)
	idByPrefix := mustCreate(byPrefix)
	idUnnamed := mustCreate("")
	running := r.name("running")
	mustCreate(running)
	if _, err := r.cli.ContainerStart(ctx, running, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	pruned := r.name("pruned")
	mustCreate(pruned)
	netName := r.name("net")
	if _, err := r.cli.NetworkCreate(ctx, netName, client.NetworkCreateOptions{Internal: true, Labels: r.labels()}); err != nil {
		t.Fatal(err)
	}
	// Another's, made past the guard: removing it through the guard is
	// nothing the run hears of.
	other := r.name("other")
	if _, err := r.direct.ContainerCreate(ctx, client.ContainerCreateOptions{Name: other, Config: &container.Config{Image: r.img, Labels: r.labels()}}); err != nil {
		t.Fatal(err)
	}

	rm := func(ref string, force bool) error {
		_, err := r.cli.ContainerRemove(ctx, ref, client.ContainerRemoveOptions{Force: force})
		return err
	}
	for _, ref := range []string{byName, idByID, idByPrefix[:12], idUnnamed} {
		if err := rm(ref, false); err != nil {
			t.Fatalf("remove %s: %v", ref, err)
		}
	}
	if err := rm(running, false); err == nil {
		t.Fatal("a running container was removed without force")
	}
	if err := rm(other, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cli.NetworkRemove(ctx, netName, client.NetworkRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	// The prune removes stopped containers of the test's tag: what is
	// left of it here is the pruned one alone.
	if _, err := r.cli.ContainerPrune(ctx, client.ContainerPruneOptions{Filters: client.Filters{}.Add("label", guardTag+"="+r.tag)}); err != nil {
		t.Fatal(err)
	}
	// A container that removes itself, waited for until it is removed.
	auto, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: r.img, Cmd: []string{"true"}, Labels: r.labels()},
		HostConfig: &container.HostConfig{NetworkMode: "none", AutoRemove: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	wait := r.cli.ContainerWait(ctx, auto.ID, client.ContainerWaitOptions{Condition: container.WaitConditionRemoved})
	if _, err := r.cli.ContainerStart(ctx, auto.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wait.Result:
	case err := <-wait.Error:
		t.Fatalf("wait for the removal of %s: %v", auto.ID, err)
	case <-time.After(time.Minute):
		t.Fatal("the container that removes itself is still there after a minute")
	}
	// `docker run --rm`, attached: the container removes itself, and the
	// command line waits for that.
	cliRemoved := ""
	if dockerCLI, err := exec.LookPath("docker"); err == nil && !r.podman {
		_, before, _ := r.hook.seen()
		cmd := exec.CommandContext(ctx, dockerCLI, "run", "--rm", "--network", "none", "--label", guardTag+"="+r.tag, r.img, "echo", "attached through the guard")
		cmd.Env = proctest.Environ(func(k string) bool { return strings.HasPrefix(k, "DOCKER_") }, "DOCKER_HOST="+r.addr, "DOCKER_CONFIG="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "attached through the guard") {
			t.Fatalf("docker run --rm through the guard: %v\n%s", err, out)
		}
		if _, created, _ := r.hook.seen(); len(created) == len(before)+1 {
			cliRemoved = strings.Fields(created[len(before)])[1]
		} else {
			t.Fatalf("docker run --rm: created %q, want one more than %q", created, before)
		}
	}
	// A name another container has: the engine refuses the create, and
	// the run must forget the name it listed for it.
	taken := r.name("taken")
	if _, err := r.direct.ContainerCreate(ctx, client.ContainerCreateOptions{Name: taken, Config: &container.Config{Image: r.img, Labels: r.labels()}}); err != nil {
		t.Fatal(err)
	}
	// Docker says 409, Podman 4.3 500 and "already in use".
	if _, err := r.create(taken, r.labels()); !cerrdefs.IsConflict(err) && (err == nil || !strings.Contains(err.Error(), "already in use")) {
		t.Fatalf("a create of a taken name: %v, want a conflict", err)
	}

	_, created, removed := r.hook.seen()
	unnamed := ""
	for _, c := range created {
		if f := strings.Fields(c); len(f) == 3 && f[2] == idUnnamed {
			unnamed = f[1]
		}
	}
	autoName := ""
	for _, c := range created {
		if f := strings.Fields(c); len(f) == 3 && f[2] == auto.ID {
			autoName = f[1]
		}
	}
	want := []string{"sandbox " + byName, "sandbox " + byID, "sandbox " + byPrefix, "sandbox " + unnamed,
		"network " + netName, "sandbox " + pruned, "sandbox " + autoName}
	if cliRemoved != "" {
		want = append(want, "sandbox "+cliRemoved)
	}
	want = append(want, "sandbox "+taken)
	if !slices.Equal(removed, want) {
		t.Errorf("the hook heard of removals\n%q\nwant\n%q", removed, want)
	}
}

// TestGuardAllLibpod: Podman's own API through the guard. Its container
// and network creates (which `podman --url` uses) are admitted and
// labelled like the Docker API's, under either router's version syntax;
// its removals are heard of; pods and play kube, which make infra
// containers no watchdog can remove, are refused with a reason.
func TestGuardAllLibpod(t *testing.T) {
	r := newGuardRig(t)
	if !r.podman {
		t.Skip("the libpod API is Podman's: this engine is Docker (the Podman gate runs this test)")
	}
	ctx := t.Context()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", strings.TrimPrefix(r.addr, "unix://"))
	}}}
	t.Cleanup(hc.CloseIdleConnections)
	call := func(method, path string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		switch b := body.(type) {
		case nil:
		case string:
			rd = strings.NewReader(b)
		default:
			j, _ := json.Marshal(b)
			rd = bytes.NewReader(j)
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://podman"+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	idOf := func(b []byte) string {
		var a struct {
			ID string `json:"Id"`
		}
		json.Unmarshal(b, &a)
		return a.ID
	}
	isRun := func(labels map[string]string) bool {
		return labels[docker.LabelRunID] == r.hook.run && labels[docker.LabelRunIDAlt] == r.hook.run && labels[guardMark] == r.hook.run
	}

	named := r.name("libpod")
	st, out := call("POST", "/v4.0.0/libpod/containers/create", map[string]any{
		"name": named, "image": r.img, "command": []string{"sleep", "60"}, "labels": r.labels("mine", "kept"), "netns": map[string]string{"nsmode": "none"},
	})
	if st != http.StatusCreated {
		t.Fatalf("libpod create: %d %s", st, out)
	}
	if got := r.labelsOf(named); !isRun(got) || got["mine"] != "kept" {
		t.Errorf("a libpod create has labels %v; want the run's and its own", got)
	}
	st, out = call("POST", "/v4.0.0/libpod/containers/create", map[string]any{
		"image": r.img, "command": []string{"sleep", "60"}, "labels": r.labels(), "netns": map[string]string{"nsmode": "none"},
	})
	if st != http.StatusCreated {
		t.Fatalf("an unnamed libpod create: %d %s", st, out)
	}
	unnamedID := idOf(out)
	if !isRun(r.labelsOf(unnamedID)) {
		t.Errorf("an unnamed libpod create has labels %v", r.labelsOf(unnamedID))
	}
	// Podman's router takes a version with letters and dashes.
	dashed := r.name("dashed")
	st, out = call("POST", "/v1.40-rz/containers/create?name="+dashed, map[string]any{"Image": r.img, "Labels": r.labels()})
	if st != http.StatusCreated {
		t.Fatalf("a compat create under /v1.40-rz: %d %s", st, out)
	}
	if !isRun(r.labelsOf(dashed)) {
		t.Errorf("a compat create under /v1.40-rz has labels %v", r.labelsOf(dashed))
	}
	for _, tc := range []struct{ path, name string }{
		{"/v4.0.0/libpod/networks/create", r.name("libpod-net")},
		{"/v1.41/networks/create", r.name("compat-net")},
	} {
		st, out := call("POST", tc.path, map[string]any{"name": tc.name, "labels": r.labels()})
		if st/100 != 2 {
			t.Fatalf("%s: %d %s", tc.path, st, out)
		}
		res, err := r.direct.NetworkInspect(ctx, tc.name, client.NetworkInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !isRun(res.Network.Labels) {
			t.Errorf("%s made network %s with labels %v; want the run's", tc.path, tc.name, res.Network.Labels)
		}
		if _, created, _ := r.hook.seen(); !slices.Contains(created, "network "+tc.name+" "+res.Network.ID) {
			t.Errorf("%s: the hook was not told the network's id (created %q)", tc.path, created)
		}
	}
	if _, created, _ := r.hook.seen(); !slices.ContainsFunc(created, func(c string) bool { return strings.HasPrefix(c, "sandbox "+named+" ") }) {
		t.Errorf("the hook was not told the libpod container's id (created %q)", created)
	}

	// Pods and play kube are refused, and nothing of them is made.
	pod := r.name("pod")
	st, out = call("POST", "/v4.0.0/libpod/pods/create", map[string]any{"name": pod, "labels": r.labels()})
	if st != http.StatusForbidden || !strings.Contains(string(out), "pod") {
		t.Errorf("a pod create: %d %s; want 403 and why", st, out)
	}
	if st, _ := call("GET", "/v4.0.0/libpod/pods/"+pod+"/exists", nil); st != http.StatusNotFound {
		t.Errorf("the refused pod exists (%d)", st)
	}
	kube := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  labels:\n    %s: %q\nspec:\n  containers:\n  - name: c\n    image: %s\n    command: [sleep, \"60\"]\n", r.name("kube"), guardTag, r.tag, r.img)
	st, out = call("POST", "/v4.0.0/libpod/play/kube", kube)
	if st != http.StatusForbidden || !strings.Contains(string(out), "play kube") {
		t.Errorf("play kube: %d %s; want 403 and why", st, out)
	}
	if st, _ := call("GET", "/v4.0.0/libpod/pods/"+r.name("kube")+"/exists", nil); st != http.StatusNotFound {
		t.Errorf("play kube made its pod (%d)", st)
	}

	// Removals through Podman's API are heard of.
	if st, out := call("DELETE", "/v4.0.0/libpod/containers/"+named+"?force=true", nil); st/100 != 2 {
		t.Fatalf("libpod remove: %d %s", st, out)
	}
	if st, out := call("DELETE", "/v4.0.0/libpod/networks/"+r.name("libpod-net"), nil); st/100 != 2 {
		t.Fatalf("libpod network remove: %d %s", st, out)
	}
	if _, _, removed := r.hook.seen(); !slices.Contains(removed, "sandbox "+named) || !slices.Contains(removed, "network "+r.name("libpod-net")) {
		t.Errorf("after libpod removals the hook heard of %q", removed)
	}

	// The podman command line, pointed at the guard.
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Log("no podman command line here: its run through the guard is not tried")
		return
	}
	runCLI := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, podman, append([]string{"--url", r.addr}, args...)...)
		cmd.Env = proctest.Environ(func(k string) bool { return strings.HasPrefix(k, "CONTAINER_") || k == "DOCKER_HOST" })
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	cliName := r.name("podman-cli")
	if out, err := runCLI("run", "-d", "--name", cliName, "--network", "none", "--label", guardTag+"="+r.tag, r.img, "sleep", "60"); err != nil {
		t.Fatalf("podman --url run -d: %v\n%s", err, out)
	}
	if !isRun(r.labelsOf(cliName)) {
		t.Errorf("podman --url run made %s with labels %v; want the run's", cliName, r.labelsOf(cliName))
	}
	// Attached: Podman's attach takes the connection over, through the
	// guard, and the container that removes itself is forgotten.
	_, before, _ := r.hook.seen()
	if out, err := runCLI("run", "--rm", "--network", "none", "--label", guardTag+"="+r.tag, r.img, "echo", "attached through the guard"); err != nil || !strings.Contains(out, "attached through the guard") {
		t.Errorf("podman --url run --rm (attached): %v\n%s", err, out)
	}
	_, created, removed := r.hook.seen()
	if len(created) != len(before)+1 {
		t.Errorf("podman --url run --rm: created %q, want one more than %q", created, before)
	} else if name := strings.Fields(created[len(before)])[1]; !slices.Contains(removed, "sandbox "+name) {
		t.Errorf("podman --url run --rm: %s removed itself, but the hook heard of removals %q only", name, removed)
	}
	if out, err := runCLI("pod", "create", "--name", r.name("cli-pod"), "--label", guardTag+"="+r.tag); err == nil || !strings.Contains(out, "pod") {
		t.Errorf("podman --url pod create: %v\n%s; want it refused with why", err, out)
	}
}

// BenchmarkGuardRemove: what the guard adds to the removal of a container
// it admitted (the engine is asked whether it is gone before the client
// has its answer), beside the same removal straight to the engine, in
// alternating order.
func BenchmarkGuardRemove(b *testing.B) {
	r := newGuardRig(b)
	ctx := b.Context()
	var viaGuard, direct []time.Duration
	rm := func(cli *client.Client, id string) time.Duration {
		start := time.Now()
		if _, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	i := 0
	for b.Loop() {
		b.StopTimer()
		guarded, err := r.create("", r.labels())
		if err != nil {
			b.Fatal(err)
		}
		other, err := r.direct.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: r.img, Labels: r.labels()}})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if i%2 == 0 {
			viaGuard = append(viaGuard, rm(r.cli, guarded))
			direct = append(direct, rm(r.direct, other.ID))
		} else {
			direct = append(direct, rm(r.direct, other.ID))
			viaGuard = append(viaGuard, rm(r.cli, guarded))
		}
		i++
	}
	p50 := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(float64(p50(direct))/1e6, "direct-p50-ms")
	b.ReportMetric(float64(p50(viaGuard))/1e6, "guard-p50-ms")
	b.ReportMetric(float64(p50(viaGuard)-p50(direct))/1e6, "added-p50-ms")
}

// TestGuardAllRemovedWithoutStopTimeout: a dead run's containers go as
// fast as the engine removes them, whichever API made them. Each is
// created through the guard (on Podman, through its own API as well as
// Docker's), started with a SIGTERM trap that writes to a folder of the
// test's, and removed by the watchdog's removal (RemoveIDs, by the ids
// it was told). No SIGTERM may reach it: a forced removal that stops a
// container first waits for it, up to its stop timeout (Podman's default
// is 10 s for one that ignores the signal), while the run's sandboxes
// are already left behind. The same holds for a remover that could not
// learn which engine it speaks to (its question of the engine's version
// unanswered, as under load): "kind unknown".
func TestGuardAllRemovedWithoutStopTimeout(t *testing.T) {
	r := newGuardRig(t)
	d := openDocker(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	apis := []string{"docker"}
	if r.podman {
		apis = append(apis, "libpod")
	}
	for _, api := range apis {
		for _, remover := range []string{"kind known", "kind unknown"} {
			t.Run(api+"/"+remover, func(t *testing.T) {
				name := r.name("noterm-" + api + "-" + strings.ReplaceAll(remover, " ", "-"))
				id := startTrapped(t, r, d, api, name, dir)
				rm := d
				var refused *atomic.Int32
				if remover == "kind unknown" {
					rm, refused = versionlessDriver(t, d.DaemonHost())
				}
				start := time.Now()
				if errs := rm.RemoveIDs(t.Context(), backend.SandboxKind, []string{id}); errs[0] != nil {
					t.Fatalf("the watchdog's removal: %v", errs[0])
				}
				t.Logf("%s API, %s: removed in %s", api, remover, time.Since(start).Round(time.Millisecond))
				if refused != nil && refused.Load() == 0 {
					t.Fatal("the remover never asked the engine's version: this row proves nothing")
				}
				if exists(t, d, id) {
					t.Errorf("container %s is still there after its removal", name)
				}
				if b, err := os.ReadFile(dir + "/term"); err == nil && strings.Contains(string(b), name+"\n") {
					// What the engine did to it, and when, says which way
					// of removing sent the signal.
					var seen []string
					for _, e := range testimage.ContainerEvents(t, d.Client(), id, start.Add(-time.Second), time.Now()) {
						seen = append(seen, fmt.Sprintf("%s %s %v", time.Unix(0, e.TimeNano).Sub(start).Round(time.Millisecond), e.Action, e.Actor.Attributes["signal"]))
					}
					t.Errorf("the removal of a dead run's container %s (created through %s's API) sent it SIGTERM and waited for it to stop: it must kill it; the engine's events since the removal began: %q", name, api, seen)
				}
			})
		}
	}
}

// startTrapped makes container name through the guard, by api ("docker"
// or "libpod"), running a shell that writes its name to dir/term on
// SIGTERM, starts it, and returns its id once it is ready.
func startTrapped(t *testing.T, r *guardRig, d *docker.Driver, api, name, dir string) string {
	t.Helper()
	ctx := t.Context()
	const script = `trap 'echo "$NAME" >>/mnt/rz/term; exit 0' TERM; echo ready; sleep 1000 & wait`
	var id string
	switch api {
	case "docker":
		res, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:       name,
			Config:     &container.Config{Image: r.img, Cmd: []string{"sh", "-c", script}, Env: []string{"NAME=" + name}, Labels: r.labels()},
			HostConfig: &container.HostConfig{NetworkMode: "none", Binds: []string{dir + ":/mnt/rz"}},
		})
		if err != nil {
			t.Fatalf("create through the guard: %v", err)
		}
		id = res.ID
	case "libpod":
		st, out := libpodCall(t, r, "POST", "/v4.0.0/libpod/containers/create", map[string]any{
			"name": name, "image": r.img, "command": []string{"sh", "-c", script}, "env": map[string]string{"NAME": name},
			"labels": r.labels(), "netns": map[string]string{"nsmode": "none"},
			"mounts": []map[string]any{{"destination": "/mnt/rz", "source": dir, "type": "bind"}},
		})
		if st != http.StatusCreated {
			t.Fatalf("libpod create through the guard: %d %s", st, out)
		}
		var a struct {
			ID string `json:"Id"`
		}
		json.Unmarshal(out, &a)
		id = a.ID
	}
	if _, err := r.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	waitLogged(t, d, id, "ready")
	return id
}

// versionlessDriver is a driver for the engine at upstream through a
// proxy of the test's that refuses every question of the engine's
// version (counted in refused) and passes everything else on: a remover
// that cannot learn whether it speaks to Podman.
func versionlessDriver(t *testing.T, upstream string) (*docker.Driver, *atomic.Int32) {
	t.Helper()
	sock, ok := strings.CutPrefix(upstream, "unix://")
	if !ok {
		t.Skipf("the engine is at %s, not a unix socket: the proxy of this row speaks to one", upstream)
	}
	dir, err := os.MkdirTemp("", "rzv") // short: a socket's path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", dir+"/engine.sock")
	if err != nil {
		t.Fatal(err)
	}
	refused := new(atomic.Int32)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "engine" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}},
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/version") {
			refused.Add(1)
			http.Error(w, `{"message":"refused by the test"}`, http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, req)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	d, err := docker.OpenHost("unix://" + dir + "/engine.sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, refused
}

// libpodCall sends a request of Podman's own API through the guard.
func libpodCall(t *testing.T, r *guardRig, method, path string, body any) (int, []byte) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", strings.TrimPrefix(r.addr, "unix://"))
	}}}
	defer hc.CloseIdleConnections()
	j, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(t.Context(), method, "http://podman"+path, bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}
