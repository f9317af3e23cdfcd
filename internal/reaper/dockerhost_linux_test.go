package reaper_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// defaultSocket is the engine a process with no configuration reaches, as
// the other members of the family find it.
const defaultSocket = "/var/run/docker.sock"

// TestSweepDockerHost: the other members record no engine, so their runs
// are taken to be on the default one. A sweep whose DOCKER_HOST merely
// spells out the default socket (as CI often sets it) reaps a dead
// Node-format run: the container labelled with the run is removed and the
// run's files deleted. A sweep whose DOCKER_HOST names another socket
// leaves the same run alone, container and files, even though that socket
// leads to the same engine here: nothing tells the sweep so, and reaping
// through the wrong engine would forget names as "not found" while they
// still run.
//
// Each sweep runs in a child process of its own, with DOCKER_HOST in its
// environment from the start: testcontainers-go resolves the engine once
// per process.
func TestSweepDockerHost(t *testing.T) {
	proctest.NeedHostPidNamespace(t) // its run is written as rightsize-node writes it
	drv := openDocker(t)
	if _, err := os.Stat(defaultSocket); err != nil {
		t.Skipf("no engine on the default socket here: %v", err)
	}
	if !drv.DefaultEndpoint() {
		t.Skipf("the engine these tests use (%s) is not the one on %s", drv.Endpoint(), defaultSocket)
	}
	other := forwardSocket(t, defaultSocket)
	dead := deadProcess(t)
	for _, tc := range []struct {
		name, host string
		reaped     bool
		reason     string
	}{
		{name: "default spelled out", host: "unix://" + defaultSocket, reaped: true, reason: "dead: no process has pid"},
		{name: "another socket", host: "unix://" + other, reaped: false, reason: "recorded without an engine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			runs := runsDir(t, cache)
			id := randHex(t, 8)
			name := "rz-" + id + "-1"
			startNodeContainer(t, drv, name, id)
			// As rightsize-node writes it: compact, its three fields in
			// this order, the start in milliseconds.
			rec := fmt.Sprintf(`{"pid":%d,"startedIso":%q,"backend":"docker"}`, dead.PID, ledger.FormatISO(dead.Start))
			writeRun(t, runs, id, []byte(rec), []string{name}, nil)

			h := proctest.StartHelper(t, proctest.Spec{
				Name: "sweeper at " + tc.host,
				Argv: proctest.TestArgv("TestSweepDockerHostHelper", "-test.timeout=3m"),
				Env: proctest.Environ(
					func(k string) bool {
						return strings.HasPrefix(k, "RIGHTSIZE_") || strings.HasPrefix(k, "RZ_") || strings.HasPrefix(k, "DOCKER_")
					},
					envRole+"=dockerhost-sweeper", ledger.EnvCacheDir+"="+cache, "DOCKER_HOST="+tc.host,
					// No ~/.testcontainers.properties: its tc.host would come
					// before DOCKER_HOST.
					"HOME="+t.TempDir()),
				Dir: t.TempDir(),
			})
			if msg := h.Expect("error"); msg != "" {
				t.Fatalf("sweep at %s: %s", tc.host, msg)
			}
			endpoint, isDefault := h.Expect("endpoint"), h.Expect("default")
			decision, reason := h.Expect("decision"), h.Expect("reason")
			h.Finish()
			t.Logf("DOCKER_HOST=%s: engine %s (default %s): %s: %s", tc.host, endpoint, isDefault, decision, reason)

			if !strings.Contains(reason, tc.reason) {
				t.Errorf("reason %q does not say %q", reason, tc.reason)
			}
			left := withoutCopy(t, runs, listDir(t, runs))
			if tc.reaped {
				if decision != string(reaper.Reaped) {
					t.Errorf("decision %q, want %q", decision, reaper.Reaped)
				}
				if containerExists(t, drv, name) {
					t.Errorf("container %s is still there", name)
				}
				if len(left) != 0 {
					t.Errorf("files left in the runs folder: %q", left)
				}
				return
			}
			if decision != string(reaper.LeftAlone) {
				t.Errorf("decision %q, want %q", decision, reaper.LeftAlone)
			}
			if !containerExists(t, drv, name) {
				t.Errorf("container %s was removed", name)
			}
			if want := []string{id + ".json", id + ".sandboxes"}; !slices.Equal(left, want) {
				t.Errorf("runs folder holds %q, want %q", left, want)
			}
		})
	}
}

// TestSweepDockerHostHelper sweeps the ledger of RIGHTSIZE_CACHE_DIR
// through the engine DOCKER_HOST names and says what it decided about the
// one run there.
func TestSweepDockerHostHelper(t *testing.T) {
	if role() != "dockerhost-sweeper" {
		t.Skip("helper process of TestSweepDockerHost")
	}
	ctx := context.Background()
	drv, err := docker.Open(ctx)
	if err != nil {
		proctest.Say("error", err.Error())
		return
	}
	defer drv.Close()
	rep, err := reaper.Sweep(ctx, drv)
	switch {
	case err != nil:
		proctest.Say("error", err.Error())
		return
	case len(rep.Runs) != 1:
		proctest.Say("error", fmt.Sprintf("the sweep decided about %d runs, want 1", len(rep.Runs)))
		return
	}
	proctest.Say("error", "")
	proctest.Say("endpoint", drv.Endpoint())
	proctest.Say("default", fmt.Sprint(drv.DefaultEndpoint()))
	proctest.Say("decision", string(rep.Runs[0].Decision))
	proctest.Say("reason", rep.Runs[0].Reason)
}

// startNodeContainer starts a busybox container named name labelled as
// rightsize-node labels its run's containers (dev.rightsize.runId only),
// removed by name when the test ends.
func startNodeContainer(t *testing.T, d *docker.Driver, name, runID string) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { removeContainer(t, d, name) })
	_, err := d.Client().ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: testimage.Busybox(t), Labels: map[string]string{labelTest: "reaper", docker.LabelRunID: runID}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	if _, err := d.Client().ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container %s: %v", name, err)
	}
}

// forwardSocket listens on a unix socket of its own and passes every
// connection through to target: the same engine, reached at another path.
func forwardSocket(t *testing.T, target string) string {
	t.Helper()
	// Short: a socket path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "rz")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "engine.sock")
	l, err := net.Listen("unix", path)
	must(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("unix", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			open = append(open, in, out)
			mu.Unlock()
			pipe := func(dst, src net.Conn) {
				io.Copy(dst, src)
				if c, ok := dst.(*net.UnixConn); ok {
					c.CloseWrite()
				}
			}
			wg.Go(func() { pipe(out, in) })
			wg.Go(func() { pipe(in, out) })
		}
	})
	return path
}
