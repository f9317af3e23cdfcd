package sandboxtest_test

import (
	"context"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// hostSeen is a wait strategy that records the host a strategy is given.
type hostSeen struct {
	mu   sync.Mutex
	host string
}

func (h *hostSeen) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	host, err := target.Host(ctx)
	h.mu.Lock()
	h.host = host
	h.mu.Unlock()
	return err
}

func (h *hostSeen) get() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.host
}

// runTracked is a plain testcontainers.Run of /server, tracked.
func runTracked(t *testing.T, img string, seen *hostSeen) *testcontainers.DockerContainer {
	t.Helper()
	ctr, err := testcontainers.Run(t.Context(), img,
		testcontainers.WithCmd(testimage.ServerPath, "8080"),
		testcontainers.WithExposedPorts(serverPort),
		testcontainers.WithWaitStrategy(wait.ForListeningPort(serverPort).WithStartupTimeout(30*time.Second), seen),
		sandboxtest.Track(t),
	)
	if err != nil {
		t.Fatalf("testcontainers.Run with Track: %v", err)
	}
	return ctr
}

func TestTrackPlainRun(t *testing.T) {
	t.Parallel()
	img := testimage.Busybox(t)
	r := newRig(t)
	in := r.session()
	var name string
	t.Run("run", func(t *testing.T) {
		r := newRig(t)
		var seen hostSeen
		ctr := runTracked(t, img, &seen)
		c, ok := r.inspect(ctr.GetContainerID())
		if !ok {
			t.Fatalf("container %s does not exist", ctr.GetContainerID())
		}
		name = strings.TrimPrefix(c.Name, "/")
		if !regexp.MustCompile(`^rz-` + in.RunID + `-[0-9]+$`).MatchString(name) {
			t.Errorf("name %q, want rz-%s-<n>", name, in.RunID)
		}
		for _, k := range []string{docker.LabelRunID, docker.LabelRunIDAlt} {
			if got := c.Config.Labels[k]; got != in.RunID {
				t.Errorf("label %s = %q, want %q", k, got, in.RunID)
			}
		}
		if !slices.Contains(c.HostConfig.ExtraHosts, hostGW) {
			t.Errorf("ExtraHosts = %q, want %q", c.HostConfig.ExtraHosts, hostGW)
		}
		hostPort := r.loopbackOnly(c, serverPort)
		if l := r.lines(in.CacheDir, in.RunID); !slices.Contains(l.sandboxes, name) {
			t.Errorf("%s is not a line of the ledger while it runs", name)
		}
		// The wait strategies were given the host ports are published on,
		// not testcontainers-go's guess.
		wantHost := "127.0.0.1"
		if h := os.Getenv(docker.EnvHostOverride); h != "" {
			wantHost = h
		}
		if got := seen.get(); got != wantHost {
			t.Errorf("the wait strategies saw host %q, want %q", got, wantHost)
		}
		if body := httpGet(t, net.JoinHostPort("127.0.0.1", hostPort)); body != serverBody {
			t.Errorf("GET = %q, want %q", body, serverBody)
		}
	})
	if name == "" {
		t.FailNow()
	}
	if _, ok := r.inspect(name); ok {
		t.Errorf("container %s outlived the test that tracked it", name)
	}
	if l := r.lines(in.CacheDir, in.RunID); slices.Contains(l.sandboxes, name) {
		t.Errorf("%s is still a line after the test that tracked it", name)
	}
}

// TestTrackTerminateToo: a user's own Terminate, in the test or in a
// cleanup of testcontainers-go's, does not trouble Track's cleanup.
func TestTrackTerminateToo(t *testing.T) {
	t.Parallel()
	img := testimage.Busybox(t)
	r := newRig(t)
	in := r.session()
	var names []string
	record := func(t *testing.T, ctr *testcontainers.DockerContainer) string {
		c, ok := newRig(t).inspect(ctr.GetContainerID())
		if !ok {
			t.Fatalf("container %s does not exist", ctr.GetContainerID())
		}
		n := strings.TrimPrefix(c.Name, "/")
		names = append(names, n)
		return n
	}
	t.Run("terminate in the test", func(t *testing.T) {
		ctr := runTracked(t, img, &hostSeen{})
		name := record(t, ctr)
		if err := ctr.Terminate(t.Context()); err != nil {
			t.Fatalf("Terminate: %v", err)
		}
		if _, ok := newRig(t).inspect(name); ok {
			t.Errorf("%s exists after Terminate", name)
		}
	})
	t.Run("testcontainers.CleanupContainer", func(t *testing.T) {
		ctr := runTracked(t, img, &hostSeen{})
		testcontainers.CleanupContainer(t, ctr)
		record(t, ctr)
	})
	if len(names) != 2 {
		t.FailNow()
	}
	l := r.lines(in.CacheDir, in.RunID)
	for _, n := range names {
		if _, ok := r.inspect(n); ok {
			t.Errorf("container %s outlived its test", n)
		}
		if slices.Contains(l.sandboxes, n) {
			t.Errorf("%s is still a line after its test", n)
		}
	}
}

// An option after Track that renames the container would create one the
// ledger does not list: Track refuses before anything is created.
func TestTrackRefusesARenameAfterIt(t *testing.T) {
	t.Parallel()
	img := testimage.Busybox(t)
	r := newRig(t)
	other := "rz-renamed-after-track-" + strings.ReplaceAll(t.Name(), "/", "-")
	r.remove(other)
	t.Cleanup(func() { r.remove(other) })
	_, err := testcontainers.Run(t.Context(), img,
		sandboxtest.Track(t),
		testcontainers.WithName(other),
	)
	if err == nil || !strings.Contains(err.Error(), "Track must be the last option") {
		t.Errorf("testcontainers.Run with an option renaming after Track: err = %v, want Track's refusal", err)
	}
	if _, ok := r.inspect(other); ok {
		t.Errorf("%s was created though the ledger does not list it", other)
	}
}
