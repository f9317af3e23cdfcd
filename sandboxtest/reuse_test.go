package sandboxtest_test

import (
	"context"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

func TestReuseIdentity(t *testing.T) {
	// The family's pinned vector (contract §8).
	base := sandboxtest.Spec{Image: "redis:7-alpine", Env: map[string]string{"A": "1", "B": "2"}, Ports: []string{"6379/tcp"}}
	const (
		canonical = `{"image":"redis:7-alpine","env":{"A":"1","B":"2"},"command":[],"exposedPorts":[6379],"memoryLimitMb":null,"copies":[]}`
		pinned    = "799aad5a3338ce3d36999c7ff2733d4673c0592d417563f334544693ec1907a5"
		name      = "rz-reuse-799aad5a3338"
	)
	id := sandboxtest.ReuseIdentity(base)
	if got := string(id.CanonicalJSON()); got != canonical {
		t.Errorf("canonical JSON of the pinned vector:\n got %s\nwant %s", got, canonical)
	}
	if got := id.Hash(); got != pinned {
		t.Errorf("hash of the pinned vector = %s, want %s", got, pinned)
	}
	if got := ledger.ReuseName(id.Hash()); got != name {
		t.Errorf("name of the pinned vector = %s, want %s", got, name)
	}

	with := func(f func(*sandboxtest.Spec)) sandboxtest.Spec {
		s := base
		s.Env = maps.Clone(base.Env)
		s.Ports = slices.Clone(base.Ports)
		f(&s)
		return s
	}
	envBA := map[string]string{}
	envBA["B"] = "2"
	envBA["A"] = "1"
	tests := []struct {
		name   string
		a, b   sandboxtest.Spec
		same   bool
		reason string
	}{
		{
			name: "port without protocol", a: base, b: with(func(s *sandboxtest.Spec) { s.Ports = []string{"6379"} }), same: true,
			reason: "a port with no protocol is tcp, and tcp ports hash as numbers",
		},
		{
			name: "env built in the other order", a: base, b: with(func(s *sandboxtest.Spec) { s.Env = envBA }), same: true,
			reason: "env keys are sorted before hashing",
		},
		{
			name: "ports in another order",
			a:    with(func(s *sandboxtest.Spec) { s.Ports = []string{"8080/tcp", "6379"} }),
			b:    with(func(s *sandboxtest.Spec) { s.Ports = []string{"6379/tcp", "8080"} }), same: true,
			reason: "exposed ports are sorted before hashing",
		},
		{
			name: "no env and an empty env",
			a:    with(func(s *sandboxtest.Spec) { s.Env = nil }),
			b:    with(func(s *sandboxtest.Spec) { s.Env = map[string]string{} }), same: true,
			reason: "both are the empty object",
		},
		{
			name: "how it is started, waited for and stopped", a: base,
			b: with(func(s *sandboxtest.Spec) {
				s.Reuse, s.StopGrace, s.WaitingFor = true, 5*time.Second, wait.ForLog("ready")
			}), same: true,
			reason: "only what the sandbox is counts, not how a test handles it",
		},
		{
			name: "another image", a: base, b: with(func(s *sandboxtest.Spec) { s.Image = "redis:7" }),
			reason: "the image is the first thing a sandbox is",
		},
		{
			name: "another env value", a: base, b: with(func(s *sandboxtest.Spec) { s.Env["A"] = "2" }),
			reason: "env values are hashed",
		},
		{
			name: "one more env var", a: base, b: with(func(s *sandboxtest.Spec) { s.Env["C"] = "" }),
			reason: "an empty value is still a variable",
		},
		{
			name: "a command", a: base, b: with(func(s *sandboxtest.Spec) { s.Cmd = []string{"redis-server"} }),
			reason: "no command hashes as [], any command differs",
		},
		{
			name: "udp instead of tcp", a: base, b: with(func(s *sandboxtest.Spec) { s.Ports = []string{"6379/udp"} }),
			reason: "a udp port hashes in exposedUdpPorts, as the Rust member hashes it, never as the tcp port of that number",
		},
		{
			name: "a memory limit", a: base, b: with(func(s *sandboxtest.Spec) { s.MemoryLimitMB = 64 }),
			reason: "no limit hashes as null",
		},
		{
			name: "a file", a: base,
			b:      with(func(s *sandboxtest.Spec) { s.Files = []sandboxtest.File{{GuestPath: "/etc/x", Content: []byte("x")}} }),
			reason: "copies are part of the identity",
		},
		{
			name:   "a file's content",
			a:      with(func(s *sandboxtest.Spec) { s.Files = []sandboxtest.File{{GuestPath: "/etc/x", Content: []byte("x")}} }),
			b:      with(func(s *sandboxtest.Spec) { s.Files = []sandboxtest.File{{GuestPath: "/etc/x", Content: []byte("y")}} }),
			reason: "a copy is hashed by the sha256 of its content",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ha, hb := sandboxtest.ReuseIdentity(tt.a).Hash(), sandboxtest.ReuseIdentity(tt.b).Hash()
			if (ha == hb) != tt.same {
				t.Errorf("same hash = %v, want %v (%s):\n a %s\n b %s", ha == hb, tt.same, tt.reason,
					sandboxtest.ReuseIdentity(tt.a).CanonicalJSON(), sandboxtest.ReuseIdentity(tt.b).CanonicalJSON())
			}
		})
	}
}

// reuseSpec is a keep-alive /server; the nonce keeps a test's identity its
// own.
func reuseSpec(img, nonce string) sandboxtest.Spec {
	return sandboxtest.Spec{
		Image: img,
		Cmd:   []string{testimage.ServerPath, "8080"},
		Ports: []string{serverPort},
		Env:   map[string]string{"RZ_TEST_NONCE": nonce},
		Reuse: true,
	}
}

// TestReuseAcrossProcesses: the keep-alive sandbox one process creates is
// adopted by the next, and survives its owner's SIGKILL and its watchdog.
func TestReuseAcrossProcesses(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cache := t.TempDir()
	k := r.reuseHelpers()
	img, hash, name, env := k.img, k.hash, k.name, k.env

	first := startHelper(t, "reuse", cache, append(env, "RZ_TEST_REUSE_ORDINARY=1")...)
	if got := first.Expect("name"); got != name {
		t.Fatalf("keep-alive name = %q, want %q", got, name)
	}
	if !regexp.MustCompile(`^rz-reuse-[0-9a-f]{12}$`).MatchString(name) {
		t.Fatalf("keep-alive name %q is not rz-reuse-<12 hex>", name)
	}
	id := first.Expect("id")
	run := first.Expect("run")
	r.closeRun(run)
	ordinary := first.Expect("ordinary")

	c, ok := r.inspect(name)
	if !ok || !c.State.Running {
		t.Fatalf("keep-alive %s is not running", name)
	}
	if c.ID != id {
		t.Errorf("the guard's id %s is not the container's %s", id, c.ID)
	}
	if got := c.Config.Labels[docker.LabelReuse]; got != hash[:12] {
		t.Errorf("label %s = %q, want %q", docker.LabelReuse, got, hash[:12])
	}
	// No run label, and none of Ryuk's: Ryuk would remove it when the
	// test session ends.
	for _, k := range []string{docker.LabelRunID, docker.LabelRunIDAlt, "org.testcontainers.reap", "org.testcontainers.sessionId"} {
		if v, ok := c.Config.Labels[k]; ok {
			t.Errorf("keep-alive %s carries the label %s=%s", name, k, v)
		}
	}
	hostPort := r.loopbackOnly(c, serverPort)
	if l := r.lines(cache, run); !slices.Contains(l.sandboxes, ordinary) || slices.Contains(l.sandboxes, name) {
		t.Errorf("run %s lists %q: want the ordinary %s and never the keep-alive %s", run, l.sandboxes, ordinary, name)
	}
	scan, err := ledger.ScanRuns(cache)
	if err != nil {
		t.Fatal(err)
	}
	scan.Each(func(rf ledger.RunFiles) error {
		if l := rf.ReadLists(); slices.Contains(l.Sandboxes, name) {
			t.Errorf("run %s lists the keep-alive %s", rf.ID, name)
		}
		return nil
	})
	e, err := ledger.ReadReuseEntry(cache, hash)
	if err != nil {
		t.Fatalf("registry entry: %v", err)
	}
	key, _ := ledger.PortKey(serverPort)
	if e.Name != name || e.Image != img || e.Backend != "docker" || strconv.Itoa(e.Ports[key]) != hostPort {
		t.Errorf("registry entry %+v, want name %s, image %s, backend docker, ports %s→%s", e, name, img, key, hostPort)
	}
	if _, err := time.Parse(time.RFC3339Nano, e.CreatedISO); err != nil {
		t.Errorf("registry entry createdIso %q: %v", e.CreatedISO, err)
	}

	first.KillAndWait()
	// Only its watchdog reaps it here; a minute, for Podman beside make
	// test's other gates (TestWatchdogAfterSIGKILL's note).
	proctest.WaitUntil(t, time.Minute, "the killed owner's watchdog to reap its run", func() bool {
		l := r.lines(cache, run)
		return !l.record && !l.sandboxFile
	})
	if _, ok := r.inspect(ordinary); ok {
		t.Errorf("the watchdog reaped run %s and left its sandbox %s", run, ordinary)
	}
	if !r.running(name) {
		t.Fatalf("the keep-alive %s did not survive its owner's SIGKILL and watchdog", name)
	}

	second := startHelper(t, "reuse", cache, env...)
	if got := second.Expect("name"); got != name {
		t.Errorf("the second process's keep-alive is %q, want %q", got, name)
	}
	if got := second.Expect("id"); got != id {
		t.Errorf("the second process got container %s, want the first one's %s adopted", got, id)
	}
	second.Finish()
	if c, ok := r.inspect(name); !ok || c.ID != id || !c.State.Running {
		t.Errorf("the keep-alive %s did not survive its second user's clean exit", name)
	}
}

// TestReuseConcurrentCreate: two processes asking at once create it once.
func TestReuseConcurrentCreate(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cache := t.TempDir()
	k := r.reuseHelpers("RZ_TEST_REUSE_WAIT=1")
	hash, name, env := k.hash, k.name, k.env

	a := startHelper(t, "reuse", cache, env...)
	b := startHelper(t, "reuse", cache, env...)
	a.Expect("waiting")
	b.Expect("waiting")
	a.Tell("go")
	b.Tell("go")
	ida, idb := a.Expect("id"), b.Expect("id")
	if ida != idb {
		t.Errorf("two processes starting at once got containers %s and %s", ida, idb)
	}
	list, err := r.cli.ContainerList(t.Context(), client.ContainerListOptions{
		All: true, Filters: client.Filters{}.Add("label", docker.LabelReuse+"="+hash[:12]),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d containers carry %s=%s, want 1", len(list.Items), docker.LabelReuse, hash[:12])
	}
	a.Finish()
	b.Finish()
	if !r.running(name) {
		t.Errorf("the keep-alive %s did not outlive its users", name)
	}
}

// TestReuseConcurrentCreateSeparateLedgers: two processes with different
// cache dirs (so no shared lock) asking at once still create it once, and
// neither removes the one the other is starting.
func TestReuseConcurrentCreateSeparateLedgers(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	k := r.reuseHelpers("RZ_TEST_REUSE_WAIT=1")
	name, env := k.name, k.env

	a := startHelper(t, "reuse", t.TempDir(), env...)
	b := startHelper(t, "reuse", t.TempDir(), env...)
	a.Expect("waiting")
	b.Expect("waiting")
	a.Tell("go")
	b.Tell("go")
	ida, idb := a.Expect("id"), b.Expect("id")
	if ida != idb {
		t.Errorf("two processes with separate ledgers got containers %s and %s", ida, idb)
	}
	if c, ok := r.inspect(name); !ok || c.ID != ida || !c.State.Running {
		t.Errorf("the keep-alive %s (%s) is not the one both adopted", name, ida)
	}
	a.Finish()
	b.Finish()
}

// TestReuseDisabled: reuse needs both RIGHTSIZE_REUSE and Spec.Reuse;
// otherwise the sandbox is an ordinary one.
func TestReuseDisabled(t *testing.T) {
	img := testimage.Busybox(t)
	r := newRig(t)
	in := r.session()
	tests := []struct {
		name, env string
		reuse     bool
	}{
		{"Spec.Reuse, RIGHTSIZE_REUSE empty", "", true},
		{"Spec.Reuse, RIGHTSIZE_REUSE=0", "0", true},
		{"RIGHTSIZE_REUSE=1, no Spec.Reuse", "1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			t.Setenv(sandboxtest.EnvReuse, tt.env)
			spec := reuseSpec(img, nonce(t))
			spec.Reuse = tt.reuse
			g := sandboxtest.Start(t, spec)
			if !regexp.MustCompile(`^rz-` + in.RunID + `-[0-9]+$`).MatchString(g.Name()) {
				t.Fatalf("name %q, want an ordinary rz-%s-<n>", g.Name(), in.RunID)
			}
			c, _ := r.inspect(g.Name())
			if c.Config.Labels[docker.LabelRunID] != in.RunID || c.Config.Labels[docker.LabelReuse] != "" {
				t.Errorf("labels %v, want the run's and no %s", c.Config.Labels, docker.LabelReuse)
			}
			if l := r.lines(in.CacheDir, in.RunID); !slices.Contains(l.sandboxes, g.Name()) {
				t.Errorf("%s is not a line of the ledger", g.Name())
			}
			if err := g.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			if _, ok := r.inspect(g.Name()); ok {
				t.Errorf("Stop left %s running, as if it were a keep-alive", g.Name())
			}
		})
	}
}

// helperReuse starts the keep-alive of RZ_TEST_REUSE_NONCE (after a "go"
// when RZ_TEST_REUSE_WAIT=1), and an ordinary sandbox too when
// RZ_TEST_REUSE_ORDINARY=1, and says what they are.
func helperReuse(t *testing.T) {
	img := testimage.Busybox(t)
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("RZ_TEST_REUSE_WAIT") == "1" {
		if err := proctest.WaitGo(); err != nil {
			t.Fatal(err)
		}
	}
	if v := os.Getenv("RZ_TEST_REUSE_IMAGE"); v != "" {
		img = v
	}
	g := sandboxtest.Start(t, reuseSpec(img, os.Getenv("RZ_TEST_REUSE_NONCE")))
	proctest.Say("name", g.Name())
	proctest.Say("id", g.Sandbox().ID())
	if c := g.Container(); c != nil {
		proctest.Say("container", c.GetContainerID())
	} else {
		proctest.Say("container", "nil")
	}
	if os.Getenv("RZ_TEST_REUSE_ORDINARY") == "1" {
		o := sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{testimage.ServerPath}})
		proctest.Say("ordinary", o.Name())
	}
	proctest.Say("run", in.RunID)
	proctest.Block()
}

// keepAlive is a keep-alive sandbox of one test's own (a fresh nonce in
// its identity), for helper processes to start or adopt.
type keepAlive struct {
	img, hash, name string
	env             []string // the helpers' environment
}

// reuseHelpers prepares the test's keepAlive, its container removed when
// the test ends, and its helpers' environment with extra.
func (r *rig) reuseHelpers(extra ...string) keepAlive {
	n := nonce(r.t)
	k := keepAlive{img: testimage.Busybox(r.t)}
	k.hash = sandboxtest.ReuseIdentity(reuseSpec(k.img, n)).Hash()
	k.name = ledger.ReuseName(k.hash)
	r.t.Cleanup(func() { r.remove(k.name) })
	// A temporary folder of the test's own: the helpers' keep-alive use
	// locks (ledger.UseDir) are left there, not in the host's.
	k.env = append([]string{sandboxtest.EnvReuse + "=1", "RZ_TEST_REUSE_NONCE=" + n, "TMPDIR=" + r.t.TempDir()}, extra...)
	return k
}

// TestReuseStaleImage: when the tag a keep-alive sandbox was made from
// names another image, the next process replaces the sandbox (saying so),
// but never while another process is using it; an adopted sandbox's
// Container() is the container, as a created one's is.
func TestReuseStaleImage(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cache := t.TempDir()
	bb, other := testimage.Busybox(t), testimage.NoShell(t)
	n := nonce(t)
	tag := "rightsize-test/reuse-stale:" + n
	ctx := context.Background()
	if _, err := r.cli.ImageTag(ctx, client.ImageTagOptions{Source: bb, Target: tag}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{}) })
	name := ledger.ReuseName(sandboxtest.ReuseIdentity(reuseSpec(tag, n)).Hash())
	t.Cleanup(func() { r.remove(name) })
	env := []string{sandboxtest.EnvReuse + "=1", "RZ_TEST_REUSE_NONCE=" + n, "RZ_TEST_REUSE_IMAGE=" + tag, "TMPDIR=" + t.TempDir()}

	first := startHelper(t, "reuse", cache, env...)
	id := first.Expect("id")
	if got := first.Expect("container"); got != id {
		t.Errorf("the created keep-alive's Container() is %s, want %s", got, id)
	}
	// The tag moves to another image (a rebuilt app image, a new pull).
	if _, err := r.cli.ImageTag(ctx, client.ImageTagOptions{Source: other, Target: tag}); err != nil {
		t.Fatal(err)
	}
	otherID, _ := r.inspectImage(other)

	// Still in use by the first process: adopted as it is.
	second := startHelperArgs(t, "reuse", cache, []string{"-test.v"}, env...)
	if got := second.Expect("id"); got != id {
		t.Errorf("while the first process uses it, the second got %s, want the same %s adopted", got, id)
	}
	if got := second.Expect("container"); got != id {
		t.Errorf("the adopted keep-alive's Container() is %s, want %s", got, id)
	}
	second.Finish()
	first.Finish()
	if !strings.Contains(second.Output(), "another process is using it") {
		t.Errorf("the second process did not say why it kept the stale sandbox:\n%s", second.Output())
	}

	// No one uses it: the next process replaces it.
	third := startHelperArgs(t, "reuse", cache, []string{"-test.v"}, env...)
	newID := third.Expect("id")
	third.Finish()
	if newID == id {
		t.Fatalf("the stale keep-alive %s was adopted again, not replaced", id)
	}
	if !strings.Contains(third.Output(), "replaced") {
		t.Errorf("the third process did not say it replaced the sandbox:\n%s", third.Output())
	}
	c, ok := r.inspect(name)
	if !ok || c.ID != newID || c.Image != otherID {
		t.Errorf("%s is %s on image %s, want %s on the tag's new image %s", name, c.ID, c.Image, newID, otherID)
	}
}
