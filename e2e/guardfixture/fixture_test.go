package guardfixture_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/probe"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The fixture's settings, from the test that runs it.
const (
	// envFixture: "guard" runs Main with GuardAll, "off" without it; unset,
	// the test skips.
	envFixture = "RZ_GUARDALL_FIXTURE"
	// envImage is the busybox test image (its /server answers HTTP).
	envImage = "RZ_FIXTURE_IMAGE"
	// envTag labels what the raw clients create, for the test's cleanup.
	envTag = "RZ_FIXTURE_TAG"
	// envThen: "block" waits for stdin to close before the test returns;
	// anything else returns at once, leaving everything running for Main.
	envThen = "RZ_FIXTURE_THEN"
)

// tagLabel marks what the fixture's raw clients create.
const tagLabel = "dev.rightsize.test.guardall"

func TestMain(m *testing.M) {
	switch os.Getenv(envFixture) {
	case "guard":
		sandboxtest.Main(m, sandboxtest.GuardAll())
	case "origin":
		sandboxtest.Main(m, sandboxtest.GuardAll(), sandboxtest.Setup(setupOrigin))
	case "off":
		sandboxtest.Main(m)
	default:
		os.Exit(m.Run())
	}
}

// openRun opens this process's run (its session: the watchdog, the
// record), says its id, and returns a Docker client from the environment
// (under GuardAll, the proxy's), closed when the test ends.
func openRun(t *testing.T, ctx context.Context) *client.Client {
	t.Helper()
	sess, err := probe.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	say("run", sess.RunID())
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// say prints a line the test outside reads.
func say(k, v string) { fmt.Printf("fixture: %s=%s\n", k, v) }

// logLines is a testcontainers-go log consumer that keeps what it hears.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Accept(lg testcontainers.Log) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSpace(string(lg.Content)))
}

func (l *logLines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.lines {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

// TestCreateEverything creates, without Track: a GenericContainer with a
// published port, a redis module container with an exec and a log
// consumer, a container through the Docker client, one with `docker run
// -d`, and a network; says each id, then blocks or returns.
func TestCreateEverything(t *testing.T) {
	mode := os.Getenv(envFixture)
	img, tag := os.Getenv(envImage), os.Getenv(envTag)
	if mode == "" || img == "" {
		t.Skip(envFixture + " is not set: this fixture is run by e2e")
	}
	ctx := context.Background()
	say("docker_host", os.Getenv("DOCKER_HOST"))
	if sess, err := probe.Session(ctx); err == nil {
		say("run", sess.RunID())
	} else {
		t.Fatal(err)
	}
	labels := map[string]string{tagLabel: tag}

	// A network, as testcontainers-go makes one.
	nw, err := network.New(ctx, network.WithLabels(labels))
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	say("network", nw.ID)

	// GenericContainer, no Track, with a port reached through it.
	gc, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        img,
			Cmd:          []string{"/server", "8080"},
			ExposedPorts: []string{"8080/tcp"},
			Labels:       labels,
			Networks:     []string{nw.Name},
			WaitingFor:   wait.ForLog("ready"),
		},
		Started: true,
	})
	if err != nil {
		t.Fatalf("GenericContainer: %v", err)
	}
	say("container", gc.GetContainerID())
	ep, err := gc.PortEndpoint(ctx, "8080/tcp", "http")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(ep + "/")
	if err != nil {
		t.Fatalf("GET %s through the guard: %v", ep, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "rightsize-test-server") {
		t.Fatalf("GET %s: %q", ep, body)
	}

	// A module, with a log consumer and an exec.
	logs := &logLines{}
	rc, err := redis.Run(ctx, img,
		testcontainers.WithCmd("sh", "-c", "echo '* Ready to accept connections'; exec /server 6379"),
		testcontainers.WithLabels(labels),
		testcontainers.WithLogConsumers(logs),
	)
	if err != nil {
		t.Fatalf("redis.Run: %v", err)
	}
	say("container", rc.GetContainerID())
	code, out, err := rc.Exec(ctx, []string{"echo", "exec-through-the-guard"})
	if err != nil || code != 0 {
		t.Fatalf("exec: code %d, %v", code, err)
	}
	if b, _ := io.ReadAll(out); !strings.Contains(string(b), "exec-through-the-guard") {
		t.Fatalf("exec output %q", b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !logs.has("Ready to accept connections") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !logs.has("Ready to accept connections") {
		t.Fatalf("the log consumer heard nothing through the guard")
	}

	// The Docker client, as a suite without testcontainers-go uses it.
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cr, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: img, Cmd: []string{"sleep", "3600"}, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatalf("ContainerCreate: %v", err)
	}
	say("container", cr.ID)
	if _, err := cli.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}

	// `docker run -d`, a child process that inherits DOCKER_HOST.
	if docker, err := exec.LookPath("docker"); err == nil {
		out, err := exec.Command(docker, "run", "-d", "--network", "none", "--label", tagLabel+"="+tag, img, "sleep", "3600").CombinedOutput()
		if err != nil {
			t.Fatalf("docker run -d: %v\n%s", err, out)
		}
		say("container", strings.TrimSpace(string(out)))
	}

	say("ready", "1")
	if os.Getenv(envThen) == "block" {
		// Until the test outside closes stdin (or kills this process).
		io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	}
}

// TestCreateThenRemove creates, with the Docker client and no Track:
// containers and a network it keeps (one with a bare run label key, one
// with rightsize-go's extra keep-alive mark alone, both of which the guard
// must take as the run's), and containers and a network it removes again
// (by name, by id); and tries one named as a keep-alive sandbox without
// the keep-alive label. It says each, then blocks or returns.
func TestCreateThenRemove(t *testing.T) {
	mode := os.Getenv(envFixture)
	img, tag := os.Getenv(envImage), os.Getenv(envTag)
	if mode == "" || img == "" {
		t.Skip(envFixture + " is not set: this fixture is run by e2e")
	}
	ctx := context.Background()
	cli := openRun(t, ctx)
	create := func(name string, labels map[string]string) (string, error) {
		labels[tagLabel] = tag
		res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:       name,
			Config:     &container.Config{Image: img, Cmd: []string{"sleep", "3600"}, Labels: labels},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		if err != nil {
			return "", err
		}
		if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
			return "", err
		}
		return res.ID, nil
	}
	nameOf := func(id string) string {
		res, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(res.Container.Name, "/")
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"rz-e2e-" + tag + "-kept", map[string]string{}},
		{"", map[string]string{"dev.rightsize.runId": ""}},
		{"", map[string]string{"dev.rightsize.reuse.go": "x"}},
	} {
		id, err := create(c.name, c.labels)
		if err != nil {
			t.Fatalf("create %q: %v", c.name, err)
		}
		say("container", id+" "+nameOf(id))
	}
	for _, byName := range []bool{true, false} {
		name := ""
		if byName {
			name = "rz-e2e-" + tag + "-gone"
		}
		id, err := create(name, map[string]string{})
		if err != nil {
			t.Fatalf("create %q: %v", name, err)
		}
		name = nameOf(id)
		ref := id
		if byName {
			ref = name
		}
		if _, err := cli.ContainerRemove(ctx, ref, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Fatalf("remove %s: %v", ref, err)
		}
		say("gone", id+" "+name)
	}
	for _, keep := range []bool{true, false} {
		name := "rz-e2e-" + tag + "-gone-net"
		if keep {
			name = "rz-e2e-" + tag + "-net"
		}
		res, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Internal: true, Labels: map[string]string{tagLabel: tag}})
		if err != nil {
			t.Fatalf("network %s: %v", name, err)
		}
		if keep {
			say("network", res.ID+" "+name)
			continue
		}
		if _, err := cli.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}); err != nil {
			t.Fatalf("remove network %s: %v", name, err)
		}
		say("gone_network", res.ID+" "+name)
	}
	reuse := "rz-reuse-" + tag + "0000"
	if _, err := create(reuse, map[string]string{}); err != nil {
		say("refused", reuse+" "+strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		say("refused", reuse+" -")
	}

	say("ready", "1")
	if os.Getenv(envThen) == "block" {
		io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	}
}

// envImageTag is the tag the fixture's first build takes (repo:tag),
// which the test outside gave an image of its own first.
const envImageTag = "RZ_FIXTURE_IMAGE_TAG"

// TestBuildAndVolume builds two images with testcontainers-go's
// FromDockerfile (FROM the test image: nothing is pulled), the first
// under envImageTag's tag, the second under a tag testcontainers-go
// chooses, each with a container made of it (not started), and creates
// two named volumes through the Docker client, one named and one not;
// says each, then blocks until stdin closes.
func TestBuildAndVolume(t *testing.T) {
	img, tag, imgTag := os.Getenv(envImage), os.Getenv(envTag), os.Getenv(envImageTag)
	if os.Getenv(envFixture) == "" || img == "" || imgTag == "" {
		t.Skip(envFixture + " is not set: this fixture is run by e2e")
	}
	ctx := context.Background()
	cli := openRun(t, ctx)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/Dockerfile", []byte("FROM "+img+"\nLABEL "+tagLabel+"="+tag+"\nRUN echo built > /built\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, ver, _ := strings.Cut(imgTag, ":")
	for i, fd := range []testcontainers.FromDockerfile{
		{Context: dir, Repo: repo, Tag: ver, KeepImage: true},
		{Context: dir, KeepImage: true},
	} {
		c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
			ContainerRequest: testcontainers.ContainerRequest{FromDockerfile: fd, Cmd: []string{"/server", "8080"}, Labels: map[string]string{tagLabel: tag}},
		})
		if err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		res, err := cli.ContainerInspect(ctx, c.GetContainerID(), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		say("container", c.GetContainerID())
		say("image", res.Container.Image)
	}
	for _, name := range []string{"rzvol-" + tag, ""} {
		v, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: map[string]string{tagLabel: tag}})
		if err != nil {
			t.Fatalf("volume create %q: %v", name, err)
		}
		say("volume", v.Volume.Name)
	}
	say("ready", "1")
	io.Copy(io.Discard, os.Stdin)
}
