package testimage_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/testimage"
)

func TestBusybox(t *testing.T) {
	ref := testimage.Busybox(t)
	if !strings.HasPrefix(ref, "rightsize-test/busybox:") {
		t.Errorf("Busybox = %q, want rightsize-test/busybox:<hash>", ref)
	}
	cli := dockerClient(t)
	checkImage(t, cli, ref, []string{"sleep", "3600"})

	// The server as PID 1, and a shell beside it.
	id := run(t, cli, ref, []string{testimage.ServerPath})
	get(t, cli, id)
	if out, code := exec(t, cli, id, "sh", "-c", "echo ok; ls /bin/nc /bin/setsid /bin/wget >/dev/null"); out != "ok\n" || code != 0 {
		t.Errorf("exec sh -c 'echo ok': exit %d, output %q; want 0, \"ok\\n\"", code, out)
	}
}

func TestNoShell(t *testing.T) {
	ref := testimage.NoShell(t)
	if !strings.HasPrefix(ref, "rightsize-test/noshell:") {
		t.Errorf("NoShell = %q, want rightsize-test/noshell:<hash>", ref)
	}
	cli := dockerClient(t)
	checkImage(t, cli, ref, []string{testimage.ServerPath})

	id := run(t, cli, ref, nil)
	get(t, cli, id)
	if out, code := exec(t, cli, id, "sh", "-c", "echo ok"); code == 0 {
		t.Errorf("exec sh in the image without a shell: exit 0, output %q; want a failure", out)
	}
}

func TestVolume(t *testing.T) {
	ref := testimage.Volume(t)
	if !strings.HasPrefix(ref, "rightsize-test/volume:") {
		t.Errorf("Volume = %q, want rightsize-test/volume:<hash>", ref)
	}
	cli := dockerClient(t)
	checkImage(t, cli, ref, []string{"sleep", "3600"})
	img, err := cli.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := img.Config.Volumes[testimage.VolumePath]; !ok {
		t.Errorf("%s declares volumes %v, want %s", ref, img.Config.Volumes, testimage.VolumePath)
	}
}

// TestSameRefEveryCall: the second call is served from memory and gives the
// same reference.
func TestSameRefEveryCall(t *testing.T) {
	if a, b := testimage.Busybox(t), testimage.Busybox(t); a != b {
		t.Errorf("Busybox gave %q, then %q", a, b)
	}
}

func TestSkipVariable(t *testing.T) {
	t.Setenv(testimage.EnvSkip, "1")
	var reached bool
	t.Run("engine test", func(t *testing.T) {
		testimage.Busybox(t)
		reached = true
	})
	if reached {
		t.Errorf("Busybox returned with %s=1; want the test skipped", testimage.EnvSkip)
	}
}

func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := testcontainers.NewDockerClientWithOpts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c.Client
}

func checkImage(t *testing.T, cli *client.Client, ref string, cmd []string) {
	t.Helper()
	img, err := cli.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config == nil {
		t.Fatalf("%s has no config", ref)
	}
	if got := img.Config.Labels[testimage.Label]; got != "1" {
		t.Errorf("%s: label %s=%q, want 1", ref, testimage.Label, got)
	}
	if got := img.Config.Cmd; fmt.Sprint(got) != fmt.Sprint(cmd) {
		t.Errorf("%s: command %q, want %q", ref, got, cmd)
	}
}

var seq atomic.Int64

// run creates and starts a container publishing the server's port on
// 127.0.0.1, and removes it when the test ends.
func run(t *testing.T, cli *client.Client, ref string, cmd []string) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("rz-testimage-%d-%d", os.Getpid(), seq.Add(1))
	port := network.MustParsePort(testimage.ServerPort)
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   name,
		Config: &container.Config{Image: ref, Cmd: cmd, ExposedPorts: network.PortSet{port: {}}},
		HostConfig: &container.HostConfig{PortBindings: network.PortMap{
			port: {{HostIP: netip.MustParseAddr("127.0.0.1")}},
		}},
	})
	// Registered before the error check: a failed create may still have
	// left a container of that name.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !strings.Contains(err.Error(), "No such container") {
			t.Errorf("removing %s: %v", name, err)
		}
	})
	if err != nil {
		t.Fatalf("creating %s from %s: %v", name, ref, err)
	}
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	return created.ID
}

// get waits until the server answers on its published port.
func get(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	ctx := context.Background()
	inspected, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindings := inspected.Container.NetworkSettings.Ports[network.MustParsePort(testimage.ServerPort)]
	if len(bindings) == 0 {
		t.Fatalf("%s is not published", testimage.ServerPort)
	}
	url := "http://127.0.0.1:" + bindings[0].HostPort + "/"
	hc := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := "rightsize-test-server port=8080\n"; resp.StatusCode != 200 || string(body) != want {
				t.Errorf("GET %s: %d %q, want 200 %q", url, resp.StatusCode, body, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exec runs cmd in the container and returns its output and exit code.
func exec(t *testing.T, cli *client.Client, id string, cmd ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return err.Error(), -1
	}
	attached, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return err.Error(), -1
	}
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &out, attached.Reader)
	attached.Close()
	if err != nil {
		t.Fatalf("reading the output of %q: %v", cmd, err)
	}
	inspected, err := cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), inspected.ExitCode
}
