package apiproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// Engine tests: the proxy in front of the real engine, driven by its real
// clients (the moby client, the docker CLI, testcontainers-go). Each test
// labels what it makes through the proxy with a label of its own, and its
// cleanup removes, straight through the engine, everything with that
// label, everything the hook heard of, and every name the test used.

func init() {
	// Ryuk's image cannot be pulled where these tests run, and they do not
	// need it. testcontainers-go reads its configuration once, at first
	// use: this must come before any test. (The helper process inherits it.)
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !ok {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

// testLabel marks what these tests make; its value is the test's run.
const testLabel = "dev.rightsize.apiproxy-test"

// rig is a proxy in front of the real engine, a client of each, and a hook
// that labels every create with the test's run.
type rig struct {
	t      *testing.T
	img    string
	run    string
	direct *client.Client // the engine itself
	hook   *recHook
	p      *Proxy
	cli    *client.Client // through the proxy

	mu    sync.Mutex
	names []string // to remove, containers or networks
}

func newRig(t *testing.T) *rig {
	t.Helper()
	img := testimage.Busybox(t) // skips under -short or RIGHTSIZE_SKIP_ENGINE_TESTS
	direct, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := direct.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Fatalf("the engine at %s: %v", direct.DaemonHost(), err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	r := &rig{t: t, img: img, run: hex.EncodeToString(b), direct: direct}
	r.hook = &recHook{
		labels: map[string]string{testLabel: r.run},
		names:  map[string]string{KindContainer: r.name("hooked"), KindNetwork: r.name("hooked-net")},
	}
	t.Cleanup(r.sweep) // after the proxy closed: cleanups run last first
	r.p = startProxy(t, direct.DaemonHost(), r.hook)
	if r.cli, err = client.New(client.WithHost(r.p.Addr())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cli.Close() })
	return r
}

// name is a name of this test's, removed by its cleanup.
func (r *rig) name(s string) string {
	n := "apx-" + r.run + "-" + s
	r.mu.Lock()
	r.names = append(r.names, n)
	r.mu.Unlock()
	return n
}

// sweep removes, through the engine, whatever the test made.
func (r *rig) sweep() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rmContainer := func(id string) {
		_, err := r.direct.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			r.t.Errorf("cleanup: remove container %s: %v", id, err)
		}
	}
	rmNetwork := func(id string) {
		_, err := r.direct.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
		if err != nil && !cerrdefs.IsNotFound(err) {
			r.t.Errorf("cleanup: remove network %s: %v", id, err)
		}
	}
	f := client.Filters{}.Add("label", testLabel+"="+r.run)
	if cs, err := r.direct.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cs.Items {
			rmContainer(c.ID)
		}
	} else {
		r.t.Errorf("cleanup: %v", err)
	}
	_, created, _ := r.hook.seen()
	for _, c := range created {
		if f := strings.Fields(c); len(f) == 3 && f[0] == KindContainer {
			rmContainer(f[2])
		}
	}
	r.mu.Lock()
	names := slices.Clone(r.names)
	r.mu.Unlock()
	for _, n := range names {
		rmContainer(n)
	}
	if ns, err := r.direct.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range ns.Items {
			rmNetwork(n.ID)
		}
	} else {
		r.t.Errorf("cleanup: %v", err)
	}
	for _, c := range created {
		if f := strings.Fields(c); len(f) == 3 && f[0] == KindNetwork {
			rmNetwork(f[2])
		}
	}
	for _, n := range names {
		if _, err := r.direct.NetworkInspect(ctx, n, client.NetworkInspectOptions{}); err == nil {
			rmNetwork(n)
		}
	}
}

// checkLabels fails the test unless the container or network id has the
// test's label (and want's), asking the engine directly.
func (r *rig) checkLabels(kind, id string, want map[string]string) {
	r.t.Helper()
	ctx := r.t.Context()
	var got map[string]string
	switch kind {
	case KindContainer:
		c, err := r.direct.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			r.t.Fatalf("inspect %s: %v", id, err)
		}
		got = c.Container.Config.Labels
	case KindNetwork:
		n, err := r.direct.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
		if err != nil {
			r.t.Fatalf("inspect network %s: %v", id, err)
		}
		got = n.Network.Labels
	}
	want = mergeMaps(want, map[string]string{testLabel: r.run})
	for k, v := range want {
		if got[k] != v {
			r.t.Errorf("%s %s: label %s = %q, want %q (labels %v)", kind, id, k, got[k], v, got)
		}
	}
}

func mergeMaps(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// createContainer creates (through the proxy) a container of cfg, not
// on any network.
func (r *rig) createContainer(name string, cfg container.Config) string {
	r.t.Helper()
	cfg.Image = r.img
	res, err := r.cli.ContainerCreate(r.t.Context(), client.ContainerCreateOptions{
		Name:       name,
		Config:     &cfg,
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		r.t.Fatalf("create container %q through the proxy: %v", name, err)
	}
	return res.ID
}

func (r *rig) start(id string) {
	r.t.Helper()
	if _, err := r.cli.ContainerStart(r.t.Context(), id, client.ContainerStartOptions{}); err != nil {
		r.t.Fatalf("start %s: %v", id, err)
	}
}

func TestEngineCreateContainer(t *testing.T) {
	r := newRig(t)
	named := r.name("named")
	id1 := r.createContainer(named, container.Config{Cmd: []string{"sleep", "60"}, Labels: map[string]string{"mine": "kept"}})
	id2 := r.createContainer("", container.Config{Cmd: []string{"sleep", "60"}})
	// A hook that names nothing: the engine chooses.
	r.hook.mu.Lock()
	r.hook.names = nil
	r.hook.mu.Unlock()
	id3 := r.createContainer("", container.Config{Cmd: []string{"sleep", "60"}})

	admits, created, failed := r.hook.seen()
	if want := []string{"container " + named, "container ", "container "}; !slices.Equal(admits, want) {
		t.Errorf("admits %q, want %q", admits, want)
	}
	hooked := r.name("hooked")
	if want := []string{"container " + named + " " + id1, "container " + hooked + " " + id2, "container  " + id3}; !slices.Equal(created, want) || len(failed) > 0 {
		t.Errorf("created %q failed %q, want created %q", created, failed, want)
	}
	r.checkLabels(KindContainer, id1, map[string]string{"mine": "kept"})
	r.checkLabels(KindContainer, id2, nil)
	r.checkLabels(KindContainer, id3, nil)
	for id, want := range map[string]string{id1: "/" + named, id2: "/" + hooked} {
		c, err := r.direct.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
		if err != nil || c.Container.Name != want {
			t.Errorf("container %s is named %q (%v), want %q", id, c.Container.Name, err, want)
		}
	}

	// A conflict: the engine says no, the hook hears Failed.
	if _, err := r.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{Name: named, Config: &container.Config{Image: r.img}}); !cerrdefs.IsConflict(err) {
		t.Errorf("a second create of %s: %v, want a conflict", named, err)
	}
	if _, _, failed := r.hook.seen(); !slices.Equal(failed, []string{"container " + named}) {
		t.Errorf("failed %q", failed)
	}
}

func TestEngineCreateNetwork(t *testing.T) {
	r := newRig(t)
	named := r.name("net")
	res, err := r.cli.NetworkCreate(t.Context(), named, client.NetworkCreateOptions{Driver: "bridge", Internal: true, Labels: map[string]string{"mine": "kept"}})
	if err != nil {
		t.Fatal(err)
	}
	// No name: the engine would refuse it; the hook gives one.
	res2, err := r.cli.NetworkCreate(t.Context(), "", client.NetworkCreateOptions{Driver: "bridge", Internal: true})
	if err != nil {
		t.Fatalf("an unnamed network create, named by the hook: %v", err)
	}
	_, created, failed := r.hook.seen()
	hooked := r.name("hooked-net")
	if want := []string{"network " + named + " " + res.ID, "network " + hooked + " " + res2.ID}; !slices.Equal(created, want) || len(failed) > 0 {
		t.Errorf("created %q failed %q, want created %q", created, failed, want)
	}
	r.checkLabels(KindNetwork, res.ID, map[string]string{"mine": "kept"})
	r.checkLabels(KindNetwork, res2.ID, nil)
	if n, err := r.direct.NetworkInspect(t.Context(), res2.ID, client.NetworkInspectOptions{}); err != nil || n.Network.Name != hooked {
		t.Errorf("network %s is named %q (%v), want %q", res2.ID, n.Network.Name, err, hooked)
	}
}

func TestEngineRefusedCreate(t *testing.T) {
	r := newRig(t)
	refused, refusedNet := r.name("refused"), r.name("refused-net")
	r.hook.mu.Lock()
	r.hook.refuse = []string{refused, refusedNet}
	r.hook.mu.Unlock()
	_, err := r.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{Name: refused, Config: &container.Config{Image: r.img}})
	if err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Errorf("a refused container create: %v", err)
	}
	_, err = r.cli.NetworkCreate(t.Context(), refusedNet, client.NetworkCreateOptions{Internal: true})
	if err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Errorf("a refused network create: %v", err)
	}
	if _, err := r.direct.ContainerInspect(t.Context(), refused, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the refused container reached the engine: %v", err)
	}
	if _, err := r.direct.NetworkInspect(t.Context(), refusedNet, client.NetworkInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the refused network reached the engine: %v", err)
	}
	if _, created, failed := r.hook.seen(); len(created)+len(failed) > 0 {
		t.Errorf("created %q failed %q after refusals", created, failed)
	}
}

// TestEngineExecStdin: exec start is a hijacked connection; the client's
// half-close ends cat's stdin.
func TestEngineExecStdin(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	id := r.createContainer(r.name("exec"), container.Config{Cmd: []string{"sleep", "60"}})
	r.start(id)
	ex, err := r.cli.ExecCreate(ctx, id, client.ExecCreateOptions{AttachStdin: true, AttachStdout: true, AttachStderr: true, Cmd: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	att, err := r.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	if _, err := io.WriteString(att.Conn, "hello"); err != nil {
		t.Fatal(err)
	}
	if err := att.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	within(t, 30*time.Second, "cat's output and end", func() {
		if _, err := stdcopy.StdCopy(&out, &errOut, att.Reader); err != nil {
			t.Errorf("read: %v", err)
		}
	})
	if out.String() != "hello" || errOut.Len() > 0 {
		t.Errorf("stdout %q stderr %q, want hello", out.String(), errOut.String())
	}
	var ins client.ExecInspectResult
	if !proctest.Poll(10*time.Second, func() bool {
		ins, err = r.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		return err == nil && !ins.Running
	}) || ins.ExitCode != 0 {
		t.Errorf("exec: %+v, %v; want ended, exit 0", ins, err)
	}
}

// TestEngineAttachStdin: an interactive attach, stdin then output, through
// the proxy; closing stdin ends the container (StdinOnce).
func TestEngineAttachStdin(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	id := r.createContainer(r.name("attach"), container.Config{
		Cmd:       []string{"cat"},
		OpenStdin: true, StdinOnce: true, AttachStdin: true, AttachStdout: true, AttachStderr: true,
	})
	att, err := r.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	r.start(id)
	io.WriteString(att.Conn, "hello\n")
	att.CloseWrite()
	var out, errOut bytes.Buffer
	within(t, 30*time.Second, "cat's output and end", func() {
		if _, err := stdcopy.StdCopy(&out, &errOut, att.Reader); err != nil {
			t.Errorf("read: %v", err)
		}
	})
	if out.String() != "hello\n" {
		t.Errorf("stdout %q stderr %q, want hello", out.String(), errOut.String())
	}
	wait := r.direct.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case res := <-wait.Result:
		if res.StatusCode != 0 {
			t.Errorf("exit %d", res.StatusCode)
		}
	case err := <-wait.Error:
		t.Errorf("wait: %v", err)
	case <-time.After(30 * time.Second):
		t.Error("the container still runs after its stdin closed")
	}
}

// TestEngineLogsFollow: a followed log streams through as it is written,
// and a client that stops following frees the engine's connection.
func TestEngineLogsFollow(t *testing.T) {
	r := newRig(t)
	id := r.createContainer(r.name("logs"), container.Config{Cmd: []string{"sh", "-c", "i=0; while :; do echo line$i; i=$((i+1)); sleep 0.2; done"}})
	r.start(id)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs, err := r.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, logs)
		pw.CloseWithError(err)
	}()
	// The stream never ends: each line comes as it is written, or never.
	within(t, 30*time.Second, "three lines of a followed log", func() {
		buf := make([]byte, 0, 64)
		for !strings.Contains(string(buf), "line2\n") {
			b := make([]byte, 64)
			n, err := pr.Read(b)
			buf = append(buf, b[:n]...)
			if err != nil {
				t.Errorf("read: %v (got %q)", err, buf)
				return
			}
		}
		if !strings.HasPrefix(string(buf), "line0\nline1\nline2\n") {
			t.Errorf("got %q", buf)
		}
	})
	logs.Close()
	cancel()
	r.cli.Close() // its idle connections too
	if !proctest.Poll(10*time.Second, func() bool { return r.p.liveConns() == 0 }) {
		t.Errorf("%d connections still open after the client closed", r.p.liveConns())
	}
}

// TestEngineDockerCLI: the docker CLI with DOCKER_HOST at the proxy:
// docker run -d (the hook names the container), docker exec -i (a
// hijacked connection and a half-close), docker logs.
func TestEngineDockerCLI(t *testing.T) {
	r := newRig(t)
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker CLI on the PATH")
	}
	cfg := t.TempDir()
	env := proctest.Environ(func(k string) bool { return strings.HasPrefix(k, "DOCKER_") },
		"DOCKER_HOST="+r.p.Addr(), "DOCKER_CONFIG="+cfg)
	try := func(stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, docker, args...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("docker %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out), nil
	}
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, err := try(stdin, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	hooked := r.name("hooked")
	id := strings.TrimSpace(run("", "run", "-d", "--network", "none", "--label", "mine=cli", r.img, "sh", "-c", "echo started; sleep 60"))
	_, created, _ := r.hook.seen()
	if want := []string{"container " + hooked + " " + id}; !slices.Equal(created, want) {
		t.Fatalf("created %q, want %q", created, want)
	}
	r.checkLabels(KindContainer, id, map[string]string{"mine": "cli"})
	got, err := try("hello from stdin", "exec", "-i", id, "cat")
	if err != nil {
		// The container must still run its 60 s sleep. Once in make
		// test it had stopped a second after its start, with other
		// packages' tests signalling processes by pid on a host whose
		// pids wrap at 32768. What the engine saw says whether it was
		// asked to stop it (a defect here, or another test's) or its
		// process died of a signal from the host: only then is it
		// started again, once, and the exec tried again.
		why, fromHost := r.whyStopped(id)
		if !fromHost {
			t.Fatalf("%v\nthe container: %s", err, why)
		}
		t.Logf("%v\nthe container: %s; started again", err, why)
		run("", "start", id)
		got = run("hello from stdin", "exec", "-i", id, "cat")
	}
	if got != "hello from stdin" {
		t.Errorf("docker exec -i cat: %q", got)
	}
	if got := run("", "logs", hooked); got != "started\n" {
		t.Errorf("docker logs: %q", got)
	}
	// Copy to and from the container: archives both ways through the
	// proxy, byte for byte.
	dir := t.TempDir()
	payload := strings.Repeat("copied through the proxy\n", 4096)
	src := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(src, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	run("", "cp", src, id+":/tmp/in.txt")
	if got := run("", "exec", id, "wc", "-c", "/tmp/in.txt"); !strings.HasPrefix(strings.TrimSpace(got), strconv.Itoa(len(payload))) {
		t.Errorf("after docker cp in, wc -c says %q, want %d bytes", got, len(payload))
	}
	back := filepath.Join(dir, "back.txt")
	run("", "cp", id+":/tmp/in.txt", back)
	if b, err := os.ReadFile(back); err != nil || string(b) != payload {
		t.Errorf("docker cp out: %d bytes (%v), want the %d copied in", len(b), err, len(payload))
	}
}

// whyStopped says what the engine knows of how container id stopped: its
// state, and its events since it was made. fromHost is true when it
// stopped of a signal with no stop or kill asked of the engine: a process
// on the host signalled it.
func (r *rig) whyStopped(id string) (why string, fromHost bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := r.direct.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "inspect: " + err.Error(), false
	}
	st := c.Container.State
	if st == nil {
		return "no state", false
	}
	why = fmt.Sprintf("status %s, exit code %d, OOM-killed %v, error %q, started %s, finished %s",
		st.Status, st.ExitCode, st.OOMKilled, st.Error, st.StartedAt, st.FinishedAt)
	ectx, ecancel := context.WithCancel(ctx)
	defer ecancel()
	ev := r.direct.Events(ectx, client.EventsListOptions{
		Since:   c.Container.Created,
		Until:   strconv.FormatInt(time.Now().Unix()+1, 10),
		Filters: client.Filters{}.Add("container", id),
	})
	asked := false
	var seen []string
	for done := false; !done; {
		select {
		case m, ok := <-ev.Messages:
			if !ok {
				done = true
				break
			}
			a := string(m.Action)
			if strings.HasPrefix(a, "kill") || strings.HasPrefix(a, "stop") || strings.HasPrefix(a, "pause") {
				asked = true
			}
			seen = append(seen, fmt.Sprintf("%s %v", a, m.Actor.Attributes["signal"]+m.Actor.Attributes["exitCode"]))
		case err := <-ev.Err:
			if err != nil && err != io.EOF {
				seen = append(seen, "events: "+err.Error())
			}
			done = true
		}
	}
	why += "; events: " + strings.Join(seen, ", ")
	return why, !st.Running && !st.OOMKilled && st.ExitCode > 128 && !asked
}

// TestEngineTestcontainers: a process whose DOCKER_HOST is the proxy runs
// a testcontainers-go container and an Exec in it.
func TestEngineTestcontainers(t *testing.T) {
	r := newRig(t)
	env := proctest.Environ(func(k string) bool {
		return strings.HasPrefix(k, "DOCKER_") || strings.HasPrefix(k, "TESTCONTAINERS_")
	}, "DOCKER_HOST="+r.p.Addr(), "TESTCONTAINERS_RYUK_DISABLED=true", envHelperImage+"="+r.img)
	h := proctest.StartHelper(t, proctest.Spec{
		Name: "testcontainers helper",
		Argv: proctest.TestArgv("TestTestcontainersHelper", "-test.timeout=2m"),
		Env:  env,
	})
	id := h.Expect("id")
	_, created, _ := r.hook.seen()
	if want := []string{"container " + r.name("hooked") + " " + id}; !slices.Equal(created, want) {
		t.Errorf("created %q, want %q", created, want)
	}
	r.checkLabels(KindContainer, id, nil)
	h.Tell("go")
	if got := h.Expect("exec"); got != `0 hello\n` {
		t.Errorf("Exec: %s", got)
	}
	h.Finish()
	if _, err := r.direct.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("Terminate through the proxy did not remove %s: %v", id, err)
	}
}

const envHelperImage = "APIPROXY_TEST_HELPER_IMAGE"

// TestTestcontainersHelper is TestEngineTestcontainers's helper process.
func TestTestcontainersHelper(t *testing.T) {
	img := os.Getenv(envHelperImage)
	if img == "" {
		t.Skip("the helper process of TestEngineTestcontainers")
	}
	ctx := context.Background()
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:              img,
			Cmd:                []string{"sleep", "60"},
			HostConfigModifier: func(hc *container.HostConfig) { hc.NetworkMode = "none" },
		},
		Started: true,
	})
	if ctr != nil {
		defer ctr.Terminate(ctx, testcontainers.StopTimeout(0))
	}
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("id", ctr.GetContainerID())
	if err := proctest.WaitGo(); err != nil {
		t.Fatal(err)
	}
	code, out, err := ctr.Exec(ctx, []string{"echo", "hello"}, tcexec.Multiplexed())
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("exec", fmt.Sprintf("%d %s", code, b))
	// sleep, as PID 1, ignores SIGTERM: no grace.
	if err := ctr.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil {
		t.Fatal(err)
	}
}

// TestEngineConnectIsNoPipe: dockerd's debug routes take any method, so
// it answers CONNECT /debug/vars with 200 and a body, and goes on reading
// requests on that connection. A create sent next on it must be seen,
// labelled and told like any other.
func TestEngineConnectIsNoPipe(t *testing.T) {
	r := newRig(t)
	c := dialRaw(t, r.p)
	br := bufio.NewReader(c)
	io.WriteString(c, "CONNECT /debug/vars HTTP/1.1\r\nHost: docker\r\n\r\n")
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("the answer to CONNECT: %v", err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("the body of the answer to CONNECT (%d): %v", resp.StatusCode, err)
	}
	t.Logf("the engine answered CONNECT /debug/vars with %d", resp.StatusCode)

	name := r.name("after-connect")
	body := fmt.Sprintf(`{"Image":%q,"Cmd":["true"],"HostConfig":{"NetworkMode":"none"}}`, r.img)
	fmt.Fprintf(c, "POST /v1.41/containers/create?name=%s HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", name, len(body), body)
	resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodPost})
	if err != nil {
		t.Fatalf("the answer to the create after CONNECT: %v", err)
	}
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the create after CONNECT: %d %s", resp.StatusCode, answer)
	}
	if admits, _, _ := r.hook.seen(); !slices.Contains(admits, "container "+name) {
		t.Errorf("the create after CONNECT was not shown to the hook (admits %q)", admits)
	}
	r.checkLabels(KindContainer, name, nil)
}

// TestEngineRemovalsHeard: the hook hears of each removal the engine
// confirmed, with the client's reference, before the client has the
// answer; of a removal the engine refused, nothing.
func TestEngineRemovalsHeard(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	byName := r.name("rm-by-name")
	r.createContainer(byName, container.Config{Cmd: []string{"sleep", "60"}})
	byID := r.createContainer(r.name("rm-by-id"), container.Config{Cmd: []string{"sleep", "60"}})
	running := r.createContainer(r.name("rm-refused"), container.Config{Cmd: []string{"sleep", "60"}})
	r.start(running)
	byOther := r.name("rm-by-other")
	r.createContainer(byOther, container.Config{Cmd: []string{"sleep", "60"}})
	nw := r.name("rm-net")
	if _, err := r.cli.NetworkCreate(ctx, nw, client.NetworkCreateOptions{Driver: "bridge", Internal: true}); err != nil {
		t.Fatal(err)
	}

	// While the hook hears of it, the client has no answer yet: the
	// hook can still see the engine as the removal left it.
	var mu sync.Mutex
	var during []bool
	r.hook.mu.Lock()
	r.hook.onRemoved = func(kind, ref string) {
		var err error
		if kind == KindNetwork {
			_, err = r.direct.NetworkInspect(ctx, ref, client.NetworkInspectOptions{})
		} else {
			_, err = r.direct.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
		}
		mu.Lock()
		during = append(during, cerrdefs.IsNotFound(err))
		mu.Unlock()
	}
	r.hook.mu.Unlock()

	if _, err := r.cli.ContainerRemove(ctx, byName, client.ContainerRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cli.ContainerRemove(ctx, byID[:12], client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	// A refused removal is heard too (the hook checks the engine, which
	// still has it), and so is one answered 404 because something else
	// removed it first, as Podman's cleanup of a --rm container races the
	// client's own DELETE.
	if _, err := r.cli.ContainerRemove(ctx, running, client.ContainerRemoveOptions{}); !cerrdefs.IsConflict(err) {
		t.Errorf("removing a running container without force: %v, want a conflict", err)
	}
	if _, err := r.direct.ContainerRemove(ctx, byOther, client.ContainerRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cli.ContainerRemove(ctx, byOther, client.ContainerRemoveOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("removing what is already gone: %v, want not found", err)
	}
	if _, err := r.cli.NetworkRemove(ctx, nw, client.NetworkRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"container " + byName, "container " + byID[:12], "container " + running, "container " + byOther, "network " + nw}
	if got := r.hook.removals(); !slices.Equal(got, want) {
		t.Errorf("the hook heard of removals %q, want %q", got, want)
	}
	mu.Lock()
	if !slices.Equal(during, []bool{true, true, false, true, true}) {
		t.Errorf("when the hook heard of each removal, was it gone? %v; want all but the refused one", during)
	}
	mu.Unlock()
	if _, err := r.cli.ContainerPrune(ctx, client.ContainerPruneOptions{Filters: client.Filters{}.Add("label", testLabel+"="+r.run)}); err != nil {
		t.Fatal(err)
	}
	if got := r.hook.removals(); len(got) != len(want)+1 || got[len(want)] != "container " {
		t.Errorf("after a prune, the hook heard of %q; want a last %q", got, "container ")
	}
}
