package reaper_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
	"github.com/rightsize/rightsize-go/reaper/scripts"
)

// The watchdog, spawned for real by an owner process (this binary,
// re-executed) that the test then kills. The removal command is either a
// stand-in that records its arguments (scripts/testdata/fake-rm, copied
// into a folder whose name holds a space) or the real docker command line.

// reapDeadline bounds how long a watchdog may take to reap after its
// owner's death: it notices within a second, the rest is the removals.
const reapDeadline = 15 * time.Second

// fakeEngine is the stand-in removal command and its call log.
type fakeEngine struct {
	prog string // fake-rm, or gated-rm in front of it
	fake string
	log  string
	env  []string
}

func newFakeEngine(t testing.TB) *fakeEngine {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "engine bin")
	must(t, os.Mkdir(dir, 0o755))
	e := &fakeEngine{fake: filepath.Join(dir, "fake-rm"), log: filepath.Join(t.TempDir(), "calls.log")}
	copyFile(t, filepath.Join("scripts", "testdata", "fake-rm"), e.fake)
	e.prog = e.fake
	state := t.TempDir()
	must(t, os.WriteFile(e.log, nil, 0o600))
	e.env = []string{"FAKE_RM_LOG=" + e.log, "FAKE_RM_STATE=" + state}
	return e
}

// gate puts gated-rm in front of fake-rm and returns the FIFO it waits on.
func (e *fakeEngine) gate(t *testing.T) string {
	t.Helper()
	gated := filepath.Join(filepath.Dir(e.fake), "gated-rm")
	copyFile(t, filepath.Join("testdata", "gated-rm"), gated)
	fifo := filepath.Join(t.TempDir(), "gate")
	must(t, syscall.Mkfifo(fifo, 0o600))
	// Whatever happens to the test, the gate opens at its end: a watchdog
	// left waiting at it would outlive the test.
	t.Cleanup(func() {
		if g, err := os.OpenFile(fifo, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
			g.WriteString("go\n")
			g.Close()
		}
	})
	e.prog = gated
	e.env = append(e.env, "GATE="+fifo, "FAKE_RM="+e.fake)
	return fifo
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	must(t, err)
	must(t, os.WriteFile(to, b, 0o755))
}

// plan is what the docker backend's plan looks like, with the stand-in.
func (e *fakeEngine) plan() backend.WatchdogPlan {
	return backend.WatchdogPlan{
		Env: e.env,
		Steps: []backend.WatchdogStep{
			{List: "sandboxes", Batch: true, Gone: []string{"No such container"}, Command: []string{e.prog, "rmf"}},
			{List: "networks", Gone: []string{"No such network", "not found"}, Command: []string{e.prog, "netrm"}},
		},
	}
}

// calls parses fake-rm's log: per call, its argument count, then its
// arguments, each NUL-terminated.
func (e *fakeEngine) calls(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(e.log)
	must(t, err)
	if len(b) == 0 {
		return nil
	}
	fields := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	var out [][]string
	for len(fields) > 0 {
		n, err := strconv.Atoi(fields[0])
		if err != nil || n > len(fields)-1 {
			t.Fatalf("corrupt fake-rm log %q", b)
		}
		out = append(out, fields[1:1+n])
		fields = fields[1+n:]
	}
	return out
}

// owner is a helper process that owns a run and its watchdog.
type owner struct {
	*proctest.Helper
	t               *testing.T
	cache, runs, id string
	watchdog        int
}

type ownerOpts struct {
	plan      string // "fake" (needs engine) or "docker"
	engine    *fakeEngine
	sandboxes []string
	networks  []string
	child     bool // spawn `sleep 30` after the watchdog
	env       []string
}

func startOwner(t *testing.T, cache string, o ownerOpts) *owner {
	t.Helper()
	env := append([]string{
		"RZ_PLAN=" + o.plan,
		"RZ_SANDBOXES=" + strings.Join(o.sandboxes, ","),
		"RZ_NETWORKS=" + strings.Join(o.networks, ","),
	}, o.env...)
	if o.engine != nil {
		env = append(env, "RZ_FAKE_PROG="+o.engine.prog, "RZ_FAKE_ENV="+strings.Join(o.engine.env, "\x1f"))
	}
	if o.plan == "docker" {
		// Its log is shown if the test fails.
		env = append(env, "RZ_IMAGE="+testimage.Busybox(t), reaper.EnvDebug+"=1")
	}
	if o.child {
		env = append(env, "RZ_CHILD=1")
	}
	h := startHelper(t, "TestWatchdogOwnerHelper", "owner", cache, helperOpts{env: env, setpgid: true})
	if o.plan == "docker" {
		d := openDocker(t)
		for _, n := range split(h.Expect("sandboxes")) {
			t.Cleanup(func() { removeContainer(t, d, n) })
		}
	}
	h.Expect("ready")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What the watchdog was doing, for the failure at hand.
		var b strings.Builder
		fmt.Fprintf(&b, "runs folder: %q\n", listDir(t, filepath.Join(cache, ledger.RunsDir)))
		if p, _ := h.Value("log"); p != "" {
			log, _ := os.ReadFile(p)
			fmt.Fprintf(&b, "watchdog log %s:\n%s\n", p, log)
		}
		if out, err := exec.Command("ps", "-eo", "pid,ppid,stat,etime,args").Output(); err == nil {
			fmt.Fprintf(&b, "processes:\n%s", out)
		}
		t.Log(b.String())
	})
	ow := &owner{Helper: h, t: t, cache: cache, runs: h.Expect("runs"), id: h.Expect("run")}
	ow.watchdog, _ = strconv.Atoi(h.Expect("watchdog"))
	if ow.runs != filepath.Join(cache, ledger.RunsDir) {
		t.Fatalf("the owner's runs folder is %s, want %s", ow.runs, filepath.Join(cache, ledger.RunsDir))
	}
	if !alive(ow.watchdog) {
		t.Fatalf("watchdog %d is not running\nowner stderr:\n%s", ow.watchdog, h.Stderr())
	}
	// Its checks done, the script waits in read(0, …): what the tests
	// inspect is that state, not a moment of its start-up (a builtin's
	// redirection briefly swaps its descriptors).
	if _, known := readSyscall[runtime.GOARCH]; known {
		proctest.WaitUntil(t, 10*time.Second, "the watchdog to wait on its stdin", func() bool { return readingStdin(ow.watchdog) })
	}
	return ow
}

// kill sends sig to the owner alone.
func (o *owner) kill(sig syscall.Signal) {
	o.t.Helper()
	must(o.t, syscall.Kill(o.Pid(), sig))
	if !o.Wait(time.Minute) {
		o.t.Fatalf("the owner did not die of %s within a minute (%s)\nstderr:\n%s", sig, o.Status(), o.Stderr())
	}
}

// filesGone reports whether the run's three files are deleted.
func (o *owner) filesGone() bool {
	for _, p := range runPaths(o.runs, o.id) {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	return true
}

func runPaths(runs, id string) []string {
	rec, sbx, nets := ledger.Paths(runs, id)
	return []string{rec, sbx, nets}
}

// waitReaped waits for the run's files to be deleted and the watchdog to
// exit, and returns how long that took.
func (o *owner) waitReaped(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	took := proctest.WaitUntil(t, d, "the watchdog to reap run "+o.id, o.filesGone)
	proctest.WaitUntil(t, d, "the watchdog to exit", func() bool { return !alive(o.watchdog) })
	return took
}

// TestWatchdogOwnerHelper is the owner: it creates a run in its cache dir,
// starts the watchdog, lists the names it is given (creating real
// containers for them with the docker plan), says ready, and waits to be
// killed.
func TestWatchdogOwnerHelper(t *testing.T) {
	if role() != "owner" {
		t.Skip("helper process of the watchdog tests")
	}
	ctx := context.Background()
	cache, err := ledger.Dir()
	if err != nil {
		helperFail("cache dir: %v", err)
	}
	var plan backend.WatchdogPlan
	var own ledger.Owner
	var drv *docker.Driver
	switch os.Getenv("RZ_PLAN") {
	case "fake":
		e := &fakeEngine{prog: os.Getenv("RZ_FAKE_PROG"), env: strings.Split(os.Getenv("RZ_FAKE_ENV"), "\x1f")}
		plan, own = e.plan(), ledger.Owner{Backend: backend.Docker, Endpoint: "unix:///fake.sock"}
	case "docker":
		if drv, err = docker.Open(ctx); err != nil {
			helperFail("docker: %v", err)
		}
		if plan, err = drv.WatchdogPlan(); err != nil {
			helperFail("docker plan: %v", err)
		}
		own = ledger.Owner{Backend: drv.Name(), Endpoint: drv.Endpoint()}
	case "docker-dead":
		// The real docker plan, against an engine that does not answer.
		dead, err := docker.OpenHost(deadHost)
		if err != nil {
			helperFail("docker: %v", err)
		}
		if plan, err = dead.WatchdogPlan(); err != nil {
			helperFail("docker plan: %v", err)
		}
		own = ledger.Owner{Backend: dead.Name(), Endpoint: dead.Endpoint()}
	default:
		helperFail("RZ_PLAN=%q", os.Getenv("RZ_PLAN"))
	}
	run, err := ledger.NewRun(cache, own)
	if err != nil {
		helperFail("run: %v", err)
	}
	wd, err := reaper.StartWatchdog(cache, run.RunsDir(), run.ID(), plan)
	if err != nil {
		helperFail("watchdog: %v", err)
	}
	proctest.Say("run", run.ID())
	proctest.Say("runs", run.RunsDir())
	proctest.Say("watchdog", strconv.Itoa(wd.PID))
	proctest.Say("script", wd.Script)
	proctest.Say("log", wd.Log)
	// Networks first, as they are created first; the networks themselves
	// are the test's (RZ_DOCKER_NET is one of them).
	for _, n := range split(os.Getenv("RZ_NETWORKS")) {
		if err := run.AddNetwork(n); err != nil {
			helperFail("%v", err)
		}
	}
	netMode := container.NetworkMode("none")
	if n := os.Getenv("RZ_DOCKER_NET"); n != "" {
		netMode = container.NetworkMode(n)
	}
	sandboxes := split(os.Getenv("RZ_SANDBOXES"))
	if k, ok := strings.CutPrefix(os.Getenv("RZ_SANDBOXES"), "family:"); ok {
		// The names rightsize gives its containers: rz-<run-id>-<seq>.
		n, _ := strconv.Atoi(k)
		sandboxes = nil
		for i := range n {
			sandboxes = append(sandboxes, fmt.Sprintf("rz-%s-%d", run.ID(), i+1))
		}
	}
	proctest.Say("sandboxes", strings.Join(sandboxes, ",")) // before any exists: the test removes them whatever happens
	for _, n := range sandboxes {
		// The line first, then the sandbox: the ledger is a superset.
		if err := run.AddSandbox(n); err != nil {
			helperFail("%v", err)
		}
		if drv == nil {
			continue
		}
		_, err := drv.Client().ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: n,
			Config: &container.Config{Image: os.Getenv("RZ_IMAGE"), Labels: map[string]string{
				labelTest: "reaper", docker.LabelRunID: run.ID(), docker.LabelRunIDAlt: run.ID(),
			}},
			HostConfig: &container.HostConfig{NetworkMode: netMode},
		})
		if err == nil {
			_, err = drv.Client().ContainerStart(ctx, n, client.ContainerStartOptions{})
		}
		if err != nil {
			helperFail("container %s: %v", n, err)
		}
	}
	if os.Getenv("RZ_CHILD") == "1" {
		// A child started after the watchdog: were the pipe's write end
		// inherited by it, the watchdog would wait for it too.
		child := exec.Command("sleep", "30")
		if err := child.Start(); err != nil {
			helperFail("child: %v", err)
		}
		proctest.Say("child", strconv.Itoa(child.Process.Pid))
	}
	proctest.Say("ready", "1")
	<-wd.Exited()
	helperFail("the watchdog exited while its owner lives: %v", wd.Err())
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func checkFakeCalls(t *testing.T, e *fakeEngine, sandboxes, networks []string) {
	t.Helper()
	sorted := slices.Sorted(slices.Values(sandboxes))
	want := [][]string{append([]string{"rmf"}, sorted...)} // one call for them all
	for _, n := range slices.Sorted(slices.Values(networks)) {
		want = append(want, []string{"netrm", n})
	}
	if got := e.calls(t); !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("removal calls\n got  %q\n want %q", got, want)
	}
}

var (
	fakeSandboxes = []string{"rz-a-1", "rz-c-3", "rz-b-2", "rz-missing-4"}
	fakeNetworks  = []string{"rz-net-1", "rz-net-missing"}
)

func TestWatchdogReapsAfterSIGKILL(t *testing.T) {
	t.Parallel()
	e := newFakeEngine(t)
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "fake", engine: e, sandboxes: fakeSandboxes, networks: fakeNetworks})
	if o.filesGone() {
		t.Fatal("the owner wrote no run files")
	}
	if calls := e.calls(t); len(calls) > 0 {
		t.Fatalf("removals ran while the owner lives: %q", calls)
	}
	o.kill(syscall.SIGKILL)
	took := o.waitReaped(t, reapDeadline)
	t.Logf("SIGKILL → run reaped in %s", took.Round(time.Millisecond))
	checkFakeCalls(t, e, fakeSandboxes, fakeNetworks)
}

// TestWatchdogSurvivesCtrlC: ^C in a terminal goes to the whole foreground
// process group; the watchdog, in a session of its own, is not in it.
func TestWatchdogSurvivesCtrlC(t *testing.T) {
	t.Parallel()
	e := newFakeEngine(t)
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "fake", engine: e, sandboxes: fakeSandboxes, networks: fakeNetworks})
	if sid := sessionOf(t, o.watchdog); sid != o.watchdog {
		t.Errorf("watchdog %d is in session %d, want a session of its own", o.watchdog, sid)
	}
	must(t, syscall.Kill(-o.Pid(), syscall.SIGINT))
	if !o.Wait(time.Minute) {
		t.Fatalf("the owner did not die of SIGINT within a minute (%s)\nstderr:\n%s", o.Status(), o.Stderr())
	}
	_, err := o.Exited()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
		t.Errorf("the owner ended with %v, want killed by SIGINT", err)
	}
	took := o.waitReaped(t, reapDeadline)
	t.Logf("SIGINT to the owner's process group → run reaped in %s", took.Round(time.Millisecond))
	checkFakeCalls(t, e, fakeSandboxes, fakeNetworks)
}

// TestWatchdogOutputNotInherited: a watchdog holding the test's stdout or
// stderr would keep `go test` waiting ("Test I/O incomplete"). The
// watchdog is held mid-reap by gated-rm while the owner's stdout must
// already have reached end-of-file.
func TestWatchdogOutputNotInherited(t *testing.T) {
	t.Parallel()
	e := newFakeEngine(t)
	fifo := e.gate(t)
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "fake", engine: e, sandboxes: fakeSandboxes})
	for _, fd := range []string{"1", "2"} {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", o.watchdog, fd)); err != nil || l != os.DevNull {
			t.Errorf("watchdog fd %s is %q (%v), want %s", fd, l, err, os.DevNull)
		}
	}
	if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", o.watchdog)); !strings.HasPrefix(l, "pipe:") {
		t.Errorf("watchdog stdin is %q, want a pipe", l)
	}
	if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", o.watchdog)); l != "/" {
		t.Errorf("watchdog works in %q, want / (it must not hold a test's folder)", l)
	}

	must(t, syscall.Kill(o.Pid(), syscall.SIGKILL))
	if !o.Wait(10 * time.Second) {
		t.Fatalf("10 s after the owner's SIGKILL (%s), its stdout and stderr have not both reached end-of-file", o.Status())
	}
	if !alive(o.watchdog) {
		t.Fatalf("the watchdog exited before the gate opened: this test proves nothing")
	}
	// The watchdog is now at the gate, or on its way there.
	if calls := e.calls(t); len(calls) > 0 {
		t.Fatalf("fake-rm ran before the gate opened: %q", calls)
	}
	g, err := os.OpenFile(fifo, os.O_RDWR, 0) // never blocks; kept open so the line waits for its reader
	must(t, err)
	t.Cleanup(func() { g.Close() })
	_, err = g.WriteString("go\n")
	must(t, err)
	o.waitReaped(t, reapDeadline)
	checkFakeCalls(t, e, fakeSandboxes, nil)
}

func TestWatchdogDebugLog(t *testing.T) {
	t.Parallel()
	e := newFakeEngine(t)
	cache := t.TempDir()
	o := startOwner(t, cache, ownerOpts{plan: "fake", engine: e, sandboxes: fakeSandboxes, env: []string{reaper.EnvDebug + "=1"}})
	want := filepath.Join(cache, ledger.ReaperDir, "watchdog-"+o.id+".log")
	if got := o.Expect("log"); got != want {
		t.Errorf("Watchdog.Log = %q, want %q", got, want)
	}
	for _, fd := range []string{"1", "2"} {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", o.watchdog, fd)); l != want {
			t.Errorf("watchdog fd %s is %q, want the log %s", fd, l, want)
		}
	}
	o.kill(syscall.SIGKILL)
	o.waitReaped(t, reapDeadline)
	b, err := os.ReadFile(want)
	must(t, err)
	for _, s := range []string{fmt.Sprintf("owner pid %d, run %s", o.Pid(), o.id), "owner gone (stdin closed)", "everything removed; ledger files deleted"} {
		if !bytes.Contains(b, []byte(s)) {
			t.Errorf("the log does not say %q:\n%s", s, b)
		}
	}
	if fi, err := os.Stat(want); err == nil && fi.Mode().Perm() != 0o600 {
		t.Errorf("the log has mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestWatchdogPipeNotInherited: the owner starts a 30 s child after its
// watchdog and is killed alone; the child lives on. Had the child inherited
// the write end of the watchdog's stdin, the watchdog would wait for it.
func TestWatchdogPipeNotInherited(t *testing.T) {
	t.Parallel()
	e := newFakeEngine(t)
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "fake", engine: e, sandboxes: fakeSandboxes, child: true})
	child, _ := strconv.Atoi(o.Expect("child"))
	stdin, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", o.watchdog))
	must(t, err)
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", child))
	must(t, err)
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", child, fd.Name())); l == stdin {
			t.Errorf("the owner's child holds the watchdog's stdin pipe %s as fd %s", l, fd.Name())
		}
	}
	o.kill(syscall.SIGKILL)
	took := o.waitReaped(t, 10*time.Second)
	if !alive(child) {
		t.Fatalf("the child %d died with the owner: this test proves nothing", child)
	}
	t.Logf("owner killed, its child alive: run reaped in %s", took.Round(time.Millisecond))
	checkFakeCalls(t, e, fakeSandboxes, nil)
}

func TestWatchdogRealDocker(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "docker", sandboxes: []string{"family:3"}})
	names := split(o.Expect("sandboxes"))
	if len(names) != 3 || names[0] != "rz-"+o.id+"-1" {
		t.Fatalf("the owner named its containers %q", names)
	}
	for _, n := range names {
		if !containerExists(t, d, n) {
			t.Fatalf("the owner did not create %s", n)
		}
	}
	o.kill(syscall.SIGKILL)
	took := o.waitReaped(t, 30*time.Second)
	t.Logf("SIGKILL → 3 containers removed by `docker rm -f` and the run's files deleted in %s", took.Round(time.Millisecond))
	for _, n := range names {
		if containerExists(t, d, n) {
			t.Errorf("container %s survived its owner", n)
		}
	}
}

// TestWatchdogRealDockerNetworks: the run's containers go first, then the
// network they were on; a network held by a container the run does not
// list stays listed, with the record, and the next sweep removes it once
// it is free.
func TestWatchdogRealDockerNetworks(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	ownNet, heldNet := uniqueName(t, "wdnet"), uniqueName(t, "wdheld")
	createNetwork(t, d, ownNet)
	createNetwork(t, d, heldNet)
	holder := uniqueName(t, "holder")
	startContainer(t, d, holder, heldNet)
	names := []string{uniqueName(t, "wdn"), uniqueName(t, "wdn")}
	for _, n := range names {
		t.Cleanup(func() { removeContainer(t, d, n) })
	}
	cache := t.TempDir()
	o := startOwner(t, cache, ownerOpts{plan: "docker", sandboxes: names, networks: []string{ownNet, heldNet},
		env: []string{"RZ_DOCKER_NET=" + ownNet}})
	o.kill(syscall.SIGKILL)
	proctest.WaitUntil(t, 30*time.Second, "the watchdog to exit", func() bool { return !alive(o.watchdog) })
	for _, n := range names {
		if containerExists(t, d, n) {
			t.Errorf("container %s survived its owner", n)
		}
	}
	if networkExists(t, d, ownNet) {
		t.Errorf("network %s survived its owner", ownNet)
	}
	if !networkExists(t, d, heldNet) {
		t.Fatalf("network %s, in use by %s, was removed", heldNet, holder)
	}
	rec, sbx, nets := ledger.Paths(o.runs, o.id)
	assertFile(t, nets, heldNet+"\n")
	if b, err := os.ReadFile(sbx); err == nil && len(b) > 0 {
		t.Errorf("%s still lists %q", sbx, b)
	}
	if _, err := os.Stat(rec); err != nil {
		t.Fatalf("the record went while a network is kept: %v", err)
	}

	removeContainer(t, d, holder)
	rep, err := reaper.Sweep(context.Background(), d, reaper.WithCacheDir(cache))
	must(t, err)
	if rr := only(t, rep); rr.Decision != reaper.Reaped || len(rr.Removed) != 1 || rr.Removed[0].String() != "network "+heldNet+": removed" {
		t.Errorf("the next sweep: %s %q removed %v kept %v; want the freed network removed", rr.Decision, rr.Reason, rr.Removed, rr.Kept)
	}
	if !o.filesGone() || networkExists(t, d, heldNet) {
		t.Errorf("after the sweep: files gone %v, network %s there %v", o.filesGone(), heldNet, networkExists(t, d, heldNet))
	}
}

// TestWatchdogEngineUnreachable: with the real docker command line and no
// engine answering, nothing is known to be removed: every name stays
// listed, and the record with them, for a later sweep.
func TestWatchdogEngineUnreachable(t *testing.T) {
	t.Parallel()
	openDocker(t) // the docker command line and a busybox image are needed, as for every engine test
	sandboxes := []string{"rz-rtdead-1", "rz-rtdead-2"}
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "docker-dead", sandboxes: sandboxes, networks: []string{"rz-rtdeadnet"}})
	o.kill(syscall.SIGKILL)
	proctest.WaitUntil(t, reapDeadline, "the watchdog to exit", func() bool { return !alive(o.watchdog) })
	rec, sbx, nets := ledger.Paths(o.runs, o.id)
	assertFile(t, sbx, "rz-rtdead-1\nrz-rtdead-2\n")
	assertFile(t, nets, "rz-rtdeadnet\n")
	if _, err := os.Stat(rec); err != nil {
		t.Errorf("the record went with every name kept: %v", err)
	}
}

// TestWatchdogHostileLedger: whatever the line files hold, the watchdog
// runs nothing from them and still removes the real containers listed.
func TestWatchdogHostileLedger(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	names := []string{uniqueName(t, "hostile"), uniqueName(t, "hostile")}
	for _, n := range names {
		t.Cleanup(func() { removeContainer(t, d, n) })
	}
	cache := t.TempDir()
	o := startOwner(t, cache, ownerOpts{plan: "docker", sandboxes: names})
	cwd, err := os.Getwd()
	must(t, err)
	pw := func(i int) string { return filepath.Join(cache, fmt.Sprintf("PWNED%d", i)) }
	garbage := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range garbage {
		// No newline: random short lines would include valid names such as
		// "0" or "e", which the engine reads as a prefix of some other
		// container's id.
		garbage[i] = byte(rng.UintN(256))
		if garbage[i] == '\n' {
			garbage[i] = 0
		}
	}
	hostile := []string{
		"$(touch PWNED)",
		"$(touch " + pw(1) + ")",
		"`touch " + pw(2) + "`",
		"rz-x;touch " + pw(3),
		"$(rz\ntouch " + pw(4) + ")", // two lines, neither a name
		"rz-x && touch " + pw(5) + " #",
		"-f",
		"--volumes",
		"$(touch " + filepath.Join(cwd, "PWNED6") + ")",
		strings.Repeat("r", 10<<20),
		string(garbage),
	}
	var b strings.Builder
	for i, h := range hostile {
		b.WriteString(h + "\n")
		if i < len(names) {
			b.WriteString(names[i] + "\n")
		}
	}
	_, sbx, nets := ledger.Paths(o.runs, o.id)
	must(t, os.WriteFile(sbx, []byte(b.String()), 0o600))
	must(t, os.WriteFile(nets, []byte("$(touch "+pw(7)+")\n-f\n"), 0o600))
	// This engine is shared: the only names the files may hold are ours.
	if got, _, err := ledger.ReadLines(sbx); err != nil || !slices.Equal(got, names) {
		t.Fatalf("the hostile .sandboxes holds the names %q (%v), want only %q", got, err, names)
	}
	if got, _, err := ledger.ReadLines(nets); err != nil || len(got) > 0 {
		t.Fatalf("the hostile .networks holds the names %q (%v), want none", got, err)
	}

	o.kill(syscall.SIGKILL)
	took := o.waitReaped(t, 30*time.Second)
	t.Logf("hostile ledger: run reaped in %s", took.Round(time.Millisecond))
	for _, n := range names {
		if containerExists(t, d, n) {
			t.Errorf("container %s survived its owner", n)
		}
	}
	for _, dir := range []string{cwd, "/", o.Cmd.Dir} {
		if m, _ := filepath.Glob(filepath.Join(dir, "PWNED*")); len(m) > 0 {
			t.Errorf("%q exist: a ledger line was run", m)
			for _, p := range m {
				os.Remove(p)
			}
		}
	}
	filepath.WalkDir(cache, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && strings.Contains(filepath.Base(p), "PWNED") {
			t.Errorf("%s exists: a ledger line was run", p)
		}
		return nil
	})
}

// TestWatchdogScript: the script is written once, mode 0600, under a name
// carrying the first 12 hex of its sha256, and rewritten when what is
// there is not it.
func TestWatchdogScript(t *testing.T) {
	t.Setenv(reaper.EnvDebug, "")
	e := newFakeEngine(t)
	cache := t.TempDir()
	runs := runsDir(t, cache)
	sum := sha256.Sum256(scripts.WatchdogSh)
	want := filepath.Join(cache, ledger.ReaperDir, "watchdog-"+hex.EncodeToString(sum[:])[:12]+".sh")

	start := func(id string) *reaper.Watchdog {
		t.Helper()
		wd, err := reaper.StartWatchdog(cache, runs, id, e.plan())
		must(t, err)
		t.Cleanup(func() { endWatchdog(t, wd) })
		if wd.Script != want {
			t.Errorf("script %s, want %s", wd.Script, want)
		}
		return wd
	}
	check := func(when string) os.FileInfo {
		t.Helper()
		fi, err := os.Lstat(want)
		must(t, err)
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: script mode %v, want a regular file with mode 0600", when, fi.Mode())
		}
		b, err := os.ReadFile(want)
		must(t, err)
		if !bytes.Equal(b, scripts.WatchdogSh) {
			t.Errorf("%s: the script holds %d bytes that are not the embedded script", when, len(b))
		}
		if got := listDir(t, filepath.Dir(want)); !slices.Equal(got, []string{filepath.Base(want)}) {
			t.Errorf("%s: the reaper folder holds %q", when, got)
		}
		return fi
	}

	// Each watchdog is ended before the script is touched: sh reads its
	// script as it goes, and the in-place write below stands for a
	// tamperer, which the reaper itself never is (it renames).
	endWatchdog(t, start("0000aaa1"))
	first := check("first spawn")
	endWatchdog(t, start("0000aaa2"))
	if again := check("second spawn"); !os.SameFile(first, again) || !again.ModTime().Equal(first.ModTime()) {
		t.Errorf("the second spawn rewrote the script")
	}

	pwned := filepath.Join(t.TempDir(), "PWNED")
	must(t, os.WriteFile(want, []byte("#!/bin/sh\ntouch "+pwned+"\n"), 0o600))
	wd := start("0000aaa3")
	if fixed := check("after tampering"); os.SameFile(first, fixed) {
		t.Errorf("the tampered script was not replaced")
	}
	endWatchdog(t, wd)
	if _, err := os.Stat(pwned); err == nil {
		t.Errorf("the tampered script ran")
	}

	// A symbolic link at the name is replaced too, not followed.
	target := filepath.Join(t.TempDir(), "elsewhere.sh")
	must(t, os.WriteFile(target, scripts.WatchdogSh, 0o600))
	must(t, os.Remove(want))
	must(t, os.Symlink(target, want))
	start("0000aaa4")
	check("after a symbolic link")
}

// TestStartWatchdogDetached: a session of its own, stdin the pipe, output
// to the null device, working in /, no child while it waits.
func TestStartWatchdogDetached(t *testing.T) {
	t.Setenv(reaper.EnvDebug, "")
	e := newFakeEngine(t)
	cache := t.TempDir()
	runs := runsDir(t, cache)
	wd, err := reaper.StartWatchdog(cache, runs, "0000bbb1", e.plan())
	must(t, err)
	t.Cleanup(func() { endWatchdog(t, wd) })
	if sid := sessionOf(t, wd.PID); sid != wd.PID {
		t.Errorf("watchdog %d is in session %d, want its own", wd.PID, sid)
	}
	for fd, want := range map[string]string{"1": os.DevNull, "2": os.DevNull} {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", wd.PID, fd)); l != want {
			t.Errorf("fd %s is %q, want %q", fd, l, want)
		}
	}
	select {
	case <-wd.Exited():
		t.Fatalf("the watchdog exited while its owner lives: %v", wd.Err())
	default:
	}

	// Released, it reaps the run: here a record and a name.
	writeRun(t, runs, "0000bbb1", []byte(`{"pid":1,"startedIso":"","backend":"docker"}`), []string{"rz-x-1"}, nil)
	endWatchdog(t, wd)
	checkFakeCalls(t, e, []string{"rz-x-1"}, nil)
	if left := listDir(t, runs); len(left) > 0 {
		t.Errorf("runs folder holds %q after the watchdog", left)
	}
}

// endWatchdog closes a watchdog's stdin and waits for it to exit.
func endWatchdog(t testing.TB, wd *reaper.Watchdog) {
	t.Helper()
	reaper.ReleaseWatchdog(wd)
	select {
	case <-wd.Exited():
	case <-time.After(reapDeadline):
		t.Errorf("watchdog %d still running %s after its stdin closed", wd.PID, reapDeadline)
	}
}

// sessionOf reads the session id of pid (field 6 of /proc/<pid>/stat).
func sessionOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(t, err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	sid, err := strconv.Atoi(f[3])
	must(t, err)
	return sid
}
