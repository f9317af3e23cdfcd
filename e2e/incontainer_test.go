//go:build linux

package e2e_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// Row 14: a test binary inside a container with the engine's socket
// mounted, as CI docker executors and devcontainers run tests: static,
// with no docker command line, in an image whose only shell is busybox's. It
// starts a sandbox with a published port and reaches it through the
// guard's Endpoint, and through what testcontainers-go says for a Track(t)
// container (the two must agree: the engine's loopback is not this
// container's, so both go through the bridge's gateway); then it is
// SIGKILLed, and its watchdog — busybox's sh waiting, then the binary
// itself, speaking the engine's API — removes everything.
func TestRow14InAContainer(t *testing.T) {
	proctest.NeedHostPidNamespace(t) // it kills the fixture by the pid the engine reports
	t.Parallel()
	r := newBareRig(t)
	if _, err := os.Stat("/var/run/docker.sock"); err != nil {
		t.Skip("the engine is not on /var/run/docker.sock: nothing to mount into a container")
	}
	goBin := goTool(t)
	bin := filepath.Join(t.TempDir(), "fixture.test")
	build := exec.Command(goBin, "test", "-c", "-o", bin, "./testdata/incontainer")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./testdata/incontainer: %v\n%s", err, out)
	}
	cli := r.eng.Client()
	ctx := t.Context()
	name := "rz-e2e-incontainer-" + strconv.Itoa(os.Getpid())
	// The test binary is not the container's PID 1: a shell is, as in a
	// CI job, so the container outlives the binary's death, and so does
	// the watchdog it spawned.
	script := "/fixture.test -test.v -test.run=^TestInContainer$ -test.timeout=5m & while :; do sleep 1; done"
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image: r.img,
			Cmd:   []string{"sh", "-c", script},
			Env: []string{"RZ_FIXTURE_IMAGE=" + r.img, "RIGHTSIZE_CACHE_DIR=/cache", "HOME=/root",
				"TESTCONTAINERS_RYUK_DISABLED=true", "RIGHTSIZE_REAPER_DEBUG=1", "PATH=/bin"},
			Labels: map[string]string{"dev.rightsize.test": "e2e"},
		},
		HostConfig: &container.HostConfig{Binds: []string{"/var/run/docker.sock:/var/run/docker.sock"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cli.ContainerRemove(cctx, res.ID, client.ContainerRemoveOptions{Force: true})
	})
	if err := copyFile(ctx, cli, res.ID, bin, "/fixture.test"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	said := map[string]string{}
	logs := func() string {
		rc, err := cli.ContainerLogs(ctx, res.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
		if err != nil {
			return err.Error()
		}
		defer rc.Close()
		var out bytes.Buffer
		stdcopy.StdCopy(&out, &out, rc)
		for _, l := range strings.Split(out.String(), "\n") {
			if kv, ok := strings.CutPrefix(strings.TrimSpace(l), "fixture: "); ok {
				k, v, _ := strings.Cut(kv, "=")
				said[k] = v
			}
		}
		return out.String()
	}
	var out string
	poll(t, 2*time.Minute, "the fixture in the container to be ready", func() (bool, string) {
		out = logs()
		return said["ready"] == "1" || strings.Contains(out, "--- FAIL") || strings.Contains(out, "panic:"), out
	})
	if said["ready"] != "1" {
		t.Fatalf("the fixture did not get ready:\n%s", out)
	}
	run := said["run"]
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if removed, err := r.eng.RemoveRun(cctx, run); err != nil || len(removed) > 0 {
			t.Logf("cleanup of run %s removed %q (%v)", run, removed, err)
		}
	})
	t.Logf("inside a container: guard at %s (%s), Track(t) at %s (%s), watchdog %s", said["guard"], said["guard.get"], said["track"], said["track.get"], said["watchdog"])
	if said["guard.get"] != "ok" || said["track.get"] != "ok" {
		t.Errorf("from inside the container: the guard's endpoint %s gave %q, Track(t)'s %s gave %q; want both reached", said["guard"], said["guard.get"], said["track"], said["track.get"])
	}
	gh, _, _ := strings.Cut(said["guard"], ":")
	th, _, _ := strings.Cut(said["track"], ":")
	if gh != th {
		t.Errorf("two answers to where a port is: the guard says %s, testcontainers-go %s", gh, th)
	}
	if said["watchdog"] != "script" {
		t.Errorf("the watchdog is %q, want the script (the default: the image has busybox's sh, and no docker command line is needed)", said["watchdog"])
	}

	// SIGKILL the test binary alone (from here: it is a process of this
	// machine too).
	top, err := cli.ContainerTop(ctx, res.ID, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,args"}})
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, p := range top.Processes {
		if len(p) == 2 && strings.HasPrefix(p[1], "/fixture.test") {
			pid, _ = strconv.Atoi(p[0])
		}
	}
	if pid == 0 {
		t.Fatalf("no fixture process in %v", top.Processes)
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll(t, goneWithin, "the run's sandboxes to be gone", func() (bool, string) {
		left, err := r.eng.RunLeft(ctx, run, nil)
		if err != nil {
			return false, err.Error()
		}
		return left == "", left
	})
	t.Logf("SIGKILL of the test binary in the container → its 2 sandboxes gone %s later", ms(time.Since(killed)))
}

// copyFile copies the file src into the container id at dst (mode 0755).
func copyFile(ctx context.Context, cli *client.Client, id, src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(dst, "/"), Mode: 0o755, Size: int64(len(b))}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err = cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: io.Reader(&buf)})
	return err
}
