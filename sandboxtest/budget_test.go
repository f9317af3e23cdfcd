package sandboxtest_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/pidns"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// hangDeletes serves the Docker API on a unix socket of its own, passing
// every request to the real engine except DELETE, which it takes and never
// answers: an engine that lists and inspects, and never removes.
func hangDeletes(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "hung.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	target := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		u, err := url.Parse(h)
		if err != nil || u.Scheme != "unix" {
			t.Skipf("the hung engine stands in front of a unix socket; DOCKER_HOST is %s", h)
		}
		target = u.Path
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", target)
		}},
		FlushInterval: -1,
	}
	stop := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { close(stop); srv.Close() })
	return "unix://" + sock
}

// An engine that answers a sweep's lookups but never its removals holds a
// test process's first sandbox no longer than the sweep's budget (here
// RIGHTSIZE_SWEEP_BUDGET's): the sweep gives up, says so, keeps the dead
// run listed for a later sweep, and the sandbox starts.
func TestFirstSandboxWithinSweepBudget(t *testing.T) {
	img := testimage.Busybox(t)
	r := newRig(t)
	hung := hangDeletes(t)
	cache := t.TempDir()
	// A dead run listing a container of its own: the sweep looks it up,
	// finds it is the run's, and asks for its removal, which never comes.
	dead := "dead" + nonce(t)[:4]
	name := "rz-" + dead + "-1"
	ctx := t.Context()
	if _, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: &container.Config{
		Image: img, Cmd: []string{"sleep", "300"}, Labels: map[string]string{docker.LabelRunID: dead},
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.remove(name) })
	runs, err := ledger.EnsureSubdir(cache, ledger.RunsDir)
	if err != nil {
		t.Fatal(err)
	}
	// Recorded against the hung engine's socket: the sweep goes through it.
	// It names this process's pid namespace (where the pid is not in use),
	// so it is dead wherever the test runs, a container included.
	rec := ledger.Record{PID: 4194033, StartedISO: "2026-11-29T20:36:06.950Z", Backend: "docker", Endpoint: hung, PidNamespace: pidns.Self()}.Marshal()
	if err := os.WriteFile(ledger.RecordPath(runs, dead), rec, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ledger.LinePath(runs, dead, ledger.SandboxKind), []byte(name+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	h := startHelper(t, "first-start", cache, "DOCKER_HOST="+hung, "RIGHTSIZE_REAPER=sweep", reaper.EnvSweepBudget+"=1500ms", "TESTCONTAINERS_RYUK_DISABLED=true", "RZ_TEST_IMAGE="+img)
	took, err := time.ParseDuration(h.Expect("took"))
	if err != nil {
		t.Fatal(err)
	}
	started := h.Expect("name")
	t.Cleanup(func() { r.remove(started) })
	t.Logf("first sandbox %s started %s after Start was called, behind an engine that never removes", started, took.Round(time.Millisecond))
	if took > 30*time.Second {
		t.Errorf("the first Start took %s: the sweep's budget did not bound it", took)
	}
	if v, _ := strconv.Unquote(h.Expect("unfinished")); !strings.Contains(v, "budget") {
		t.Errorf("the sweep says it ended %q; want it to say its budget was spent", v)
	}
	if v := h.Expect("budget"); v != "1.5s" {
		t.Errorf("the sweep's budget was %s; want %s's 1.5s", v, reaper.EnvSweepBudget)
	}
	if _, err := os.Stat(ledger.RecordPath(runs, dead)); err != nil {
		t.Errorf("the dead run's record is gone (%v): what the sweep did not finish must stay for a later one", err)
	}
	// The owner is killed: its stop would wait on the hung engine.
	h.KillAndWait()
}

// helperFirstStart starts one sandbox, says how long Start took and what
// the first sweep said of its end, and blocks.
func helperFirstStart(t *testing.T) {
	start := time.Now()
	g := sandboxtest.Start(t, sandboxtest.Spec{Image: os.Getenv("RZ_TEST_IMAGE"), Cmd: []string{"sleep", "300"}})
	proctest.Say("took", time.Since(start).String())
	proctest.Say("name", g.Name())
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("unfinished", strconv.Quote(in.Sweep.Unfinished))
	proctest.Say("budget", in.SweepBudget.String())
	proctest.Block()
}
