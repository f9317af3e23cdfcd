package reaper_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// dockerConfig makes a docker command line configuration folder of the
// test's own, with one context per name: host, and TLS material where
// tls is set, laid out as `docker context create` lays them out. It
// becomes DOCKER_CONFIG for the rest of the test, with no DOCKER_HOST.
func dockerConfig(t *testing.T, hosts map[string]string, tls ...string) {
	t.Helper()
	dir := t.TempDir()
	for name, host := range hosts {
		sum := sha256.Sum256([]byte(name))
		digest := hex.EncodeToString(sum[:])
		meta := filepath.Join(dir, "contexts", "meta", digest)
		must(t, os.MkdirAll(meta, 0o700))
		must(t, os.WriteFile(filepath.Join(meta, "meta.json"),
			fmt.Appendf(nil, `{"Name":%q,"Metadata":{},"Endpoints":{"docker":{"Host":%q,"SkipTLSVerify":false}}}`, name, host), 0o600))
		if slices.Contains(tls, name) {
			must(t, os.MkdirAll(filepath.Join(dir, "contexts", "tls", digest, "docker"), 0o700))
		}
	}
	t.Setenv("DOCKER_CONFIG", dir)
	t.Setenv("DOCKER_HOST", "")
}

// age sets the modification time of every file of run id to d ago.
func age(t *testing.T, runs, id string, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	for _, name := range listDir(t, runs) {
		if strings.HasPrefix(name, id+".") {
			must(t, os.Chtimes(filepath.Join(runs, name), old, old))
		}
	}
}

// TestSweepForgetsAfterEveryEngine: a dead run of another member (which
// records no engine) whose names the engine swept lacks is looked for on
// every other engine it may have used: DOCKER_HOST, the Docker contexts.
// While its record is younger than ledger.ForgetAfter it stays, the
// engines asked named. Once older, with nothing of it on any of them, it
// is forgotten, and said once: its fate names the names forgotten, and a
// later process tells it once. An engine that cannot be asked (a context
// reached over TLS) keeps it, however old.
func TestSweepForgetsAfterEveryEngine(t *testing.T) {
	proctest.NeedHostPidNamespace(t) // its record names no pid namespace
	drv := openDocker(t)
	if !drv.DefaultEndpoint() {
		t.Skipf("the engine is %s: the other members' runs, which record none, are judged on the default engine only", drv.Endpoint())
	}
	other := "unix://" + forwardSocket(t, defaultSocket) // an engine that answers, and has none of the run
	dead := deadProcess(t)
	ctx := context.Background()
	newRun := func(t *testing.T) (cache, runs, id string) {
		cache = t.TempDir()
		runs = runsDir(t, cache)
		id = randHex(t, 8)
		// As rightsize-node writes it; its container on no engine here.
		writeRun(t, runs, id, systemfRecord(dead.PID, dead.Start, "docker"), []string{"rz-" + id + "-1"}, nil)
		return cache, runs, id
	}

	t.Run("young", func(t *testing.T) {
		dockerConfig(t, map[string]string{"other": other, "gone": "unix:///nonexistent/docker.sock"})
		cache, runs, id := newRun(t)
		before := snapshot(t, runs)
		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
		must(t, err)
		rr := runReport(t, rep, id)
		if rr.Decision != reaper.LeftAlone || !strings.Contains(rr.Reason, other) || !strings.Contains(rr.Reason, "forgotten once its record is "+ledger.ForgetAfter.String()) {
			t.Errorf("run %s: %s (%s); want it left alone, saying it asked %s and when it is forgotten", id, rr.Decision, rr.Reason, other)
		}
		if after := snapshotWithoutCopy(t, runs); !maps.Equal(before, after) {
			t.Errorf("files changed:\n before %v\n after  %v", before, after)
		}
		if fates, _ := ledger.ReadFates(cache); len(fates) != 0 {
			t.Errorf("a run left alone has a fate: %+v", fates)
		}
	})

	t.Run("old", func(t *testing.T) {
		dockerConfig(t, map[string]string{"other": other})
		cache, runs, id := newRun(t)
		age(t, runs, id, ledger.ForgetAfter+time.Hour)
		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
		must(t, err)
		rr := runReport(t, rep, id)
		if rr.Decision != reaper.Reaped || !strings.Contains(rr.Reason, "forgotten") || len(rr.Removed) != 1 || rr.Removed[0].Outcome != ledger.Forgotten {
			t.Errorf("run %s: %s (%s), %v; want it forgotten", id, rr.Decision, rr.Reason, rr.Removed)
		}
		if left := listDir(t, runs); len(left) != 0 {
			t.Errorf("the runs folder holds %q", left)
		}
		told := reaper.TellFates(cache, "")
		if len(told) != 1 || !strings.Contains(told[0], "forgot 1 sandbox") {
			t.Errorf("told %q; want one line saying the sandbox was forgotten", told)
		}
		if again := reaper.TellFates(cache, ""); len(again) != 0 {
			t.Errorf("told again: %q", again)
		}
		rep, err = reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
		must(t, err)
		if rep.Seen != 0 {
			t.Errorf("a later sweep still sees %d runs", rep.Seen)
		}
	})

	t.Run("an engine that cannot be asked", func(t *testing.T) {
		dockerConfig(t, map[string]string{"other": other, "remote": "tcp://127.0.0.1:1"}, "remote")
		cache, runs, id := newRun(t)
		age(t, runs, id, ledger.ForgetAfter+time.Hour)
		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
		must(t, err)
		rr := runReport(t, rep, id)
		if rr.Decision != reaper.LeftAlone || !strings.Contains(rr.Reason, "tcp://127.0.0.1:1") || !strings.Contains(rr.Reason, "could not be asked") {
			t.Errorf("run %s: %s (%s); want it kept, naming the engine that could not be asked", id, rr.Decision, rr.Reason)
		}
		if !slices.Contains(listDir(t, runs), id+ledger.SandboxesExt) {
			t.Errorf("its lines are gone: %q", listDir(t, runs))
		}
	})
}

// TestSweepFindsRunOnItsEngine: a dead run of another member whose
// container is on another engine the run may have used (a Docker context
// here) is reaped there: the container, labelled with the run, is removed
// on that engine, and the run's files are deleted. The other engine is
// Podman's service (scripts/podman.sh), beside Docker's default socket;
// under the Podman gate (DOCKER_HOST names Podman) the sweep goes through
// the default socket explicitly.
func TestSweepFindsRunOnItsEngine(t *testing.T) {
	proctest.NeedHostPidNamespace(t)
	drv := openDocker(t)
	var sweeper, there *docker.Driver
	switch {
	case !drv.DefaultEndpoint():
		// The Podman gate: the test's engine is the other one.
		d, err := docker.OpenHost("unix://" + defaultSocket)
		must(t, err)
		t.Cleanup(func() { d.Close() })
		if _, err := d.Client().Ping(context.Background(), client.PingOptions{}); err != nil {
			t.Skipf("no engine answers on the default socket beside %s: %v", drv.Endpoint(), err)
		}
		sweeper, there = d, drv
	default:
		host := podmanHost(t)
		if host == "" {
			t.Skip("no Podman service answers here (scripts/podman.sh start): there is no second engine")
		}
		d, err := docker.OpenHost(host)
		must(t, err)
		t.Cleanup(func() { d.Close() })
		sweeper, there = drv, d
		// The test's image, as the test's own engine has it.
		ref, archive := testimage.BusyboxArchive(t)
		if ref != testimage.Busybox(t) {
			t.Fatalf("the busybox archive is %s, the engine's image %s", ref, testimage.Busybox(t))
		}
		res, err := d.Client().ImageLoad(context.Background(), bytes.NewReader(archive))
		must(t, err)
		io.Copy(io.Discard, res)
		res.Close()
	}
	dockerConfig(t, map[string]string{"other": there.DaemonHost()})
	cache := t.TempDir()
	runs := runsDir(t, cache)
	id := randHex(t, 8)
	name := "rz-" + id + "-1"
	startNodeContainer(t, there, name, id)
	dead := deadProcess(t)
	writeRun(t, runs, id, systemfRecord(dead.PID, dead.Start, "docker"), []string{name}, nil)

	rep, err := reaper.Sweep(context.Background(), sweeper, reaper.WithCacheDir(cache))
	must(t, err)
	rr := runReport(t, rep, id)
	if rr.Decision != reaper.Reaped || !strings.Contains(rr.Reason, "found on "+there.DaemonHost()) {
		t.Errorf("run %s: %s (%s); want it reaped on %s", id, rr.Decision, rr.Reason, there.DaemonHost())
	}
	if containerExists(t, there, name) {
		t.Errorf("its container %s is still on %s", name, there.Endpoint())
	}
	if left := listDir(t, runs); len(left) != 0 {
		t.Errorf("the runs folder holds %q", left)
	}
}

// podmanHost is the DOCKER_HOST of Podman's service as scripts/podman.sh
// starts it, when it answers; "" otherwise.
func podmanHost(t *testing.T) string {
	t.Helper()
	p := "/run/rightsize-podman/podman.sock"
	if x := os.Getenv("XDG_RUNTIME_DIR"); os.Geteuid() != 0 && x != "" {
		p = filepath.Join(x, "rightsize-podman", "podman.sock")
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	host := (&url.URL{Scheme: "unix", Path: p}).String()
	c, err := client.New(client.WithHost(host))
	if err != nil {
		return ""
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Ping(ctx, client.PingOptions{}); err != nil {
		return ""
	}
	return host
}
