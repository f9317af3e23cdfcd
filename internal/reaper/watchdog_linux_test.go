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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/backend/memory"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/reaper/scripts"
)

// The watchdog, spawned for real by an owner process (this binary,
// re-executed) that the test then kills. The engine is either the memory
// backend (a real backend whose sandboxes and networks are files of a
// folder, which the watchdog opens as the owner did) or the real Docker
// engine.

// reapDeadline bounds how long a watchdog may take to reap after its
// owner's death: it notices within a second, the rest is the removals.
const reapDeadline = 15 * time.Second

// memEngine is a memory backend's folder, for owners and watchdogs.
type memEngine struct{ dir string }

func newMemEngine(t testing.TB) *memEngine {
	t.Helper()
	return &memEngine{dir: filepath.Join(t.TempDir(), "engine dir")}
}

// open is the memory backend on the folder.
func (e *memEngine) open(t testing.TB) backend.Driver {
	t.Helper()
	d, err := memory.Open(e.dir)
	must(t, err)
	return d
}

// plan is the memory backend's watchdog plan.
func (e *memEngine) plan(t testing.TB) backend.WatchdogPlan {
	t.Helper()
	p, err := e.open(t).Watchdog("")
	must(t, err)
	return p
}

// objects lists the sandboxes and networks the folder holds, as
// "sandbox NAME" and "network NAME".
func (e *memEngine) objects(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(e.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	must(t, err)
	var out []string
	for _, en := range entries {
		kind, rest, ok := strings.Cut(en.Name(), ".")
		if name, json := strings.CutSuffix(rest, ".json"); ok && json {
			out = append(out, kind+" "+name)
		}
	}
	return out
}

// hold takes the folder's lock, as a removal of the memory backend does,
// so that the watchdog's removals wait: release lets them go.
func (e *memEngine) hold(t *testing.T) (release func()) {
	t.Helper()
	must(t, os.MkdirAll(e.dir, 0o700))
	l := ledger.NewFileLock(filepath.Join(e.dir, ".lock"))
	if ok, err := l.TryLock(); err != nil || !ok {
		t.Fatalf("the engine's lock: %v (taken %v)", err, ok)
	}
	var once sync.Once
	release = func() { once.Do(func() { l.Unlock() }) }
	t.Cleanup(release)
	return release
}

// checkGone: nothing of the run is left on the memory engine.
func checkGone(t *testing.T, e *memEngine) {
	t.Helper()
	if left := e.objects(t); len(left) > 0 {
		t.Errorf("left on the engine after the watchdog: %q", left)
	}
}

// owner is a helper process that owns a run and its watchdog.
type owner struct {
	*proctest.Helper
	t               *testing.T
	cache, runs, id string
	watchdog        int
}

type ownerOpts struct {
	plan      string // "memory" (needs engine) or "docker"
	engine    *memEngine
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
		env = append(env, "RZ_MEMORY_DIR="+o.engine.dir)
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
	if _, known := proctest.WaitingOnStdin(ow.watchdog); known {
		proctest.WaitUntil(t, 10*time.Second, "the watchdog to wait on its stdin", func() bool { w, _ := proctest.WaitingOnStdin(ow.watchdog); return w })
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
	return []string{rec, ledger.OwnRecordPath(runs, id), sbx, nets}
}

// waitReaped waits for the run's files to be deleted and the watchdog to
// exit, and returns how long that took.
func (o *owner) waitReaped(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	took := proctest.WaitUntil(t, d, "the watchdog to reap run "+o.id, o.filesGone)
	proctest.WaitUntil(t, d, "the watchdog to exit", func() bool { return !alive(o.watchdog) })
	return took
}

// TestWatchdogOwnerHelper is the owner: it opens a session in its cache
// dir (the real protocol: watchdog, ledger line, create, tell), creates the
// networks and sandboxes it is given (real containers with the docker
// plan), says ready, and waits to be killed.
func TestWatchdogOwnerHelper(t *testing.T) {
	if role() != "owner" {
		t.Skip("helper process of the watchdog tests")
	}
	ctx := context.Background()
	cache, err := ledger.Dir()
	if err != nil {
		helperFail("cache dir: %v", err)
	}
	var drv backend.Driver
	var real *docker.Driver
	switch os.Getenv("RZ_PLAN") {
	case "memory":
		if drv, err = memory.Open(os.Getenv("RZ_MEMORY_DIR")); err != nil {
			helperFail("memory: %v", err)
		}
	case "docker":
		if real, err = docker.Open(ctx); err != nil {
			helperFail("docker: %v", err)
		}
		drv = real
	case "docker-dead":
		// The real docker plan, against an engine that does not answer.
		dead, err := docker.OpenHost(deadHost)
		if err != nil {
			helperFail("docker: %v", err)
		}
		drv = dead
	default:
		helperFail("RZ_PLAN=%q", os.Getenv("RZ_PLAN"))
	}
	// The helper keeps a ledger and a watchdog whatever RIGHTSIZE_REAPER
	// its parent was run with.
	os.Setenv(reaper.EnvReaper, "on")
	s, err := reaper.Open(ctx, drv, reaper.WithCacheDir(cache))
	if err != nil {
		helperFail("session: %v", err)
	}
	proctest.Say("run", s.RunID())
	proctest.Say("runs", s.Ledger().RunsDir())
	sandboxes := split(os.Getenv("RZ_SANDBOXES"))
	if k, ok := strings.CutPrefix(os.Getenv("RZ_SANDBOXES"), "family:"); ok {
		n, _ := strconv.Atoi(k)
		sandboxes = nil
		for range n {
			sandboxes = append(sandboxes, s.NextName())
		}
	}
	proctest.Say("sandboxes", strings.Join(sandboxes, ",")) // before any exists: the test removes them whatever happens
	netMode := container.NetworkMode("none")
	if n := os.Getenv("RZ_DOCKER_NET"); n != "" {
		netMode = container.NetworkMode(n)
	}
	create := func(k backend.Kind, name string) {
		_, err := s.Create(ctx, k, name, func(ctx context.Context) (string, error) {
			switch {
			case os.Getenv("RZ_PLAN") == "docker-dead":
				return "", errors.New("no engine")
			case real == nil && k == backend.NetworkKind:
				return drv.CreateNetwork(ctx, name, s.RunID())
			case real == nil:
				sbx, err := drv.Create(ctx, name, backend.Spec{Image: "busybox", RunID: s.RunID()})
				if err != nil {
					return "", err
				}
				return sbx.ID(), nil
			case k == backend.NetworkKind:
				return real.CreateNetwork(ctx, name, s.RunID())
			}
			res, err := real.Client().ContainerCreate(ctx, client.ContainerCreateOptions{
				Name: name,
				Config: &container.Config{Image: os.Getenv("RZ_IMAGE"), Labels: map[string]string{
					labelTest: "reaper", docker.LabelRunID: s.RunID(), docker.LabelRunIDAlt: s.RunID(),
				}},
				HostConfig: &container.HostConfig{NetworkMode: netMode},
			})
			if err == nil {
				_, err = real.Client().ContainerStart(ctx, name, client.ContainerStartOptions{})
			}
			return res.ID, err
		})
		if err != nil && os.Getenv("RZ_PLAN") != "docker-dead" {
			helperFail("%s %s: %v", k, name, err)
		}
	}
	// Networks first, as they are created first.
	for _, n := range split(os.Getenv("RZ_NETWORKS")) {
		create(backend.NetworkKind, n)
	}
	for _, n := range sandboxes {
		create(backend.SandboxKind, n)
	}
	if len(sandboxes)+len(split(os.Getenv("RZ_NETWORKS"))) == 0 {
		// The watchdog starts with the first creation; there is none.
		if _, err := s.Admit(backend.SandboxKind, "rz-"+s.RunID()+"-0"); err != nil {
			helperFail("%v", err)
		}
	}
	wd := s.Watchdog()
	if wd == nil {
		helperFail("no watchdog")
	}
	proctest.Say("watchdog", strconv.Itoa(wd.PID))
	proctest.Say("kind", wd.Kind)
	proctest.Say("script", wd.Script)
	proctest.Say("log", wd.Log)
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

var (
	memSandboxes = []string{"rz-a-1", "rz-c-3", "rz-b-2", "rz-d-4"}
	memNetworks  = []string{"rz-net-1", "rz-net-2"}
)

func TestWatchdogReapsAfterSIGKILL(t *testing.T) {
	t.Parallel()
	e := newMemEngine(t)
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "memory", engine: e, sandboxes: memSandboxes, networks: memNetworks})
	if o.filesGone() {
		t.Fatal("the owner wrote no run files")
	}
	if got := e.objects(t); len(got) != len(memSandboxes)+len(memNetworks) {
		t.Fatalf("on the engine while the owner lives: %q", got)
	}
	o.kill(syscall.SIGKILL)
	took := o.waitReaped(t, reapDeadline)
	t.Logf("SIGKILL → run reaped in %s", took.Round(time.Millisecond))
	checkGone(t, e)
}

// TestWatchdogSurvivesCtrlC: ^C in a terminal goes to the whole foreground
// process group; the watchdog, in a session of its own, is not in it.
func TestWatchdogSurvivesCtrlC(t *testing.T) {
	t.Parallel()
	e := newMemEngine(t)
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "memory", engine: e, sandboxes: memSandboxes, networks: memNetworks})
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
	checkGone(t, e)
}

// TestWatchdogOutputNotInherited: a watchdog holding the test's stdout or
// stderr would keep `go test` waiting ("Test I/O incomplete"). The
// watchdog is held mid-reap (the engine's lock is taken) while the owner's
// stdout must already have reached end-of-file.
func TestWatchdogOutputNotInherited(t *testing.T) {
	t.Parallel()
	e := newMemEngine(t)
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "memory", engine: e, sandboxes: memSandboxes})
	release := e.hold(t)
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
		t.Fatalf("the watchdog exited before the lock was let go: this test proves nothing")
	}
	// The watchdog now waits for the lock, or is on its way there.
	if got := e.objects(t); len(got) != len(memSandboxes) {
		t.Fatalf("removed before the lock was let go: left %q", got)
	}
	for _, fd := range []string{"1", "2"} {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", o.watchdog, fd)); err != nil || l != os.DevNull {
			t.Errorf("the reaping watchdog's fd %s is %q (%v), want %s", fd, l, err, os.DevNull)
		}
	}
	release()
	o.waitReaped(t, reapDeadline)
	checkGone(t, e)
}

func TestWatchdogDebugLog(t *testing.T) {
	t.Parallel()
	e := newMemEngine(t)
	cache := t.TempDir()
	o := startOwner(t, cache, ownerOpts{plan: "memory", engine: e, sandboxes: memSandboxes, env: []string{reaper.EnvDebug + "=1"}})
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
	e := newMemEngine(t)
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "memory", engine: e, sandboxes: memSandboxes, child: true})
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
	checkGone(t, e)
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
	t.Logf("SIGKILL → 3 containers removed by the watchdog and the run's files deleted in %s", took.Round(time.Millisecond))
	for _, n := range names {
		if containerExists(t, d, n) {
			t.Errorf("container %s survived its owner", n)
		}
	}
}

// TestWatchdogRealDockerNetworks: the run's containers go first, then the
// network they were on; a network held by a container the run does not own
// cannot be confirmed gone: the run's files stay as they are, and the next
// sweep removes the network once it is free.
func TestWatchdogRealDockerNetworks(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	ownNet, heldNet := uniqueName(t, "wdnet"), uniqueName(t, "wdheld")
	names := []string{uniqueName(t, "wdn"), uniqueName(t, "wdn")}
	for _, n := range names {
		t.Cleanup(func() { removeContainer(t, d, n) })
	}
	for _, n := range []string{ownNet, heldNet} {
		t.Cleanup(func() { d.Client().NetworkRemove(context.Background(), n, client.NetworkRemoveOptions{}) })
	}
	cache := t.TempDir()
	o := startOwner(t, cache, ownerOpts{plan: "docker", sandboxes: names, networks: []string{ownNet, heldNet},
		env: []string{"RZ_DOCKER_NET=" + ownNet}})
	holder := uniqueName(t, "holder")
	startContainer(t, d, holder, heldNet, "")
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
	if o.filesGone() {
		t.Fatalf("the run's files went while a network is kept")
	}

	removeContainer(t, d, holder)
	rep, err := reaper.Sweep(context.Background(), d, reaper.WithCacheDir(cache))
	must(t, err)
	if rr := only(t, rep); rr.Decision != reaper.Reaped {
		t.Errorf("the next sweep: %s %q removed %v kept %v; want the run reaped", rr.Decision, rr.Reason, rr.Removed, rr.Kept)
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
	o := startOwner(t, t.TempDir(), ownerOpts{plan: "docker-dead", sandboxes: sandboxes})
	o.kill(syscall.SIGKILL)
	proctest.WaitUntil(t, reapDeadline, "the watchdog to exit", func() bool { return !alive(o.watchdog) })
	_, sbx, _ := ledger.Paths(o.runs, o.id)
	assertFile(t, sbx, "rz-rtdead-1\nrz-rtdead-2\n")
	if _, err := os.Stat(ledger.OwnRecordPath(o.runs, o.id)); err != nil {
		t.Errorf("the record went with every name kept: %v", err)
	}
}

// TestWatchdogOwnsWhatItRemoves: whatever is written into the run's lists
// after the spawn — another user's container by name, a short id of one, a
// keep-alive container's name, random bytes — the watchdog never reads
// them: it removes what the owner told it and what carries the run's
// label, and nothing else; keep-alive containers, even labelled with the
// run, stay.
func TestWatchdogOwnsWhatItRemoves(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	cache := t.TempDir()
	o := startOwner(t, cache, ownerOpts{plan: "docker", sandboxes: []string{"family:2"}})
	names := split(o.Expect("sandboxes"))
	stranger := uniqueName(t, "postgres-dev")
	strangerID := startContainer(t, d, stranger, "", "")
	keep := "rz-reuse-" + randHex(t, 12)
	startContainer(t, d, keep, "", o.id, docker.LabelReuse, keep[len("rz-reuse-"):])
	keepByName := "rz-reuse-" + randHex(t, 12)
	startContainer(t, d, keepByName, "", o.id)
	garbage := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	pw := filepath.Join(cache, "PWNED")
	_, sbx, nets := ledger.Paths(o.runs, o.id)
	f, err := os.OpenFile(sbx, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	fmt.Fprintf(f, "%s\n%s\n%s\n%s\n$(touch %s)\n", stranger, strangerID[:12], keep, keepByName, pw)
	f.Write(garbage)
	must(t, f.Close())
	must(t, os.WriteFile(nets, []byte("bridge\n$(touch "+pw+")\n"), 0o600))

	o.kill(syscall.SIGKILL)
	took := o.waitReaped(t, 30*time.Second)
	t.Logf("run reaped in %s", took.Round(time.Millisecond))
	for _, n := range names {
		if containerExists(t, d, n) {
			t.Errorf("container %s survived its owner", n)
		}
	}
	for _, n := range []string{stranger, keep, keepByName} {
		if !containerExists(t, d, n) {
			t.Errorf("container %s, not the run's, was removed", n)
		}
	}
	if !networkExists(t, d, "bridge") {
		t.Error("the default bridge network is gone")
	}
	if _, err := os.Stat(pw); err == nil {
		t.Error("a line of the ledger was run")
	}
}

// TestWatchdogScriptRewrittenAfterSpawn: the watchdog was handed the
// script's text, never its file: a file rewritten after the spawn (dash
// reads a script file lazily, the rest of it after the owner dies) runs
// nothing, and the owner's sandboxes are still removed.
func TestWatchdogScriptRewrittenAfterSpawn(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	cache := t.TempDir()
	o := startOwner(t, cache, ownerOpts{plan: "docker", sandboxes: []string{"family:1"}})
	names := split(o.Expect("sandboxes"))
	script := o.Expect("script")
	if script == "" {
		o.kill(syscall.SIGKILL)
		o.waitReaped(t, 30*time.Second)
		t.Skip("the engine is served by the native watchdog (Podman): there is no script to rewrite")
	}
	pw := filepath.Join(cache, "PWNED")
	injected := bytes.Repeat([]byte("# padding past any read buffer\n"), 1000)
	injected = append(injected, []byte("touch "+pw+"\n")...)
	must(t, os.WriteFile(script, append(append([]byte(nil), watchdogSh...), injected...), 0o600))
	must(t, os.Chmod(script, 0o777))
	o.kill(syscall.SIGKILL)
	o.waitReaped(t, 30*time.Second)
	if _, err := os.Stat(pw); err == nil {
		t.Fatal("the rewritten script file ran")
	}
	if containerExists(t, d, names[0]) {
		t.Errorf("container %s survived its owner", names[0])
	}
}

// TestWatchdogNative: both watchdogs are this very program, speaking the
// engine's API: the script one run at the owner's death (the default; no
// docker command line needed), the native one waiting itself (asked for):
// the same removal after SIGKILL.
func TestWatchdogNative(t *testing.T) {
	d := openDocker(t)
	for _, tc := range []struct{ name, env, kind string }{
		{"the default, no docker on PATH", "PATH=" + t.TempDir(), reaper.ScriptWatchdog},
		{"native asked for", reaper.EnvWatchdog + "=native", reaper.NativeWatchdog},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := startOwner(t, t.TempDir(), ownerOpts{plan: "docker", sandboxes: []string{"family:3"}, env: []string{tc.env}})
			if k := o.Expect("kind"); k != tc.kind {
				t.Fatalf("watchdog kind %q, want %q", k, tc.kind)
			}
			names := split(o.Expect("sandboxes"))
			if rss, err := proctest.VmRSSKiB(o.watchdog); err == nil {
				cpu0 := cpuTicks(t, o.watchdog)
				time.Sleep(time.Second) // the measurement window, not a synchronisation
				t.Logf("waiting %s watchdog: VmRSS %d KiB, CPU %d ticks over 1 s", tc.kind, rss, cpuTicks(t, o.watchdog)-cpu0)
			}
			o.kill(syscall.SIGKILL)
			took := o.waitReaped(t, 30*time.Second)
			t.Logf("SIGKILL → 3 containers removed by the %s watchdog and the run's files deleted in %s", tc.kind, took.Round(time.Millisecond))
			for _, n := range names {
				if containerExists(t, d, n) {
					t.Errorf("container %s survived its owner", n)
				}
			}
		})
	}
}

// TestWatchdogScript: a readable copy of the script is written once, mode
// 0600, under a name carrying the first 12 hex of its sha256; whatever is
// at that name later is never read back, never run.
// watchdogSh is the script the watchdog runs, as package scripts carries it.
var watchdogSh, _ = scripts.FS.ReadFile("watchdog.sh")

func TestWatchdogScript(t *testing.T) {
	t.Setenv(reaper.EnvDebug, "")
	e := newMemEngine(t)
	cache := t.TempDir()
	runs := runsDir(t, cache)
	sum := sha256.Sum256(watchdogSh)
	want := filepath.Join(cache, ledger.ReaperDir, "watchdog-"+hex.EncodeToString(sum[:])[:12]+".sh")

	start := func(id string) *reaper.Watchdog {
		t.Helper()
		wd, err := reaper.StartWatchdog(cache, runs, id, e.plan(t))
		must(t, err)
		t.Cleanup(func() { endWatchdog(t, wd) })
		if wd.Script != want || wd.Kind != reaper.ScriptWatchdog {
			t.Errorf("script %s (%s), want %s", wd.Script, wd.Kind, want)
		}
		return wd
	}
	endWatchdog(t, start("0000aaa1"))
	fi, err := os.Lstat(want)
	must(t, err)
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("script mode %v, want a regular file with mode 0600", fi.Mode())
	}
	if b, _ := os.ReadFile(want); !bytes.Equal(b, watchdogSh) {
		t.Errorf("the copy holds %d bytes that are not the embedded script", len(b))
	}

	pwned := filepath.Join(t.TempDir(), "PWNED")
	must(t, os.WriteFile(want, []byte("#!/bin/sh\ntouch "+pwned+"\n"), 0o600))
	wd := start("0000aaa3")
	// The embedded script ran, as the work it hands over shows: the run's
	// files deleted.
	writeRun(t, runs, "0000aaa3", []byte(`{"pid":1,"startedIso":"","backend":"memory"}`), nil, nil)
	endWatchdog(t, wd)
	if _, err := os.Stat(pwned); err == nil {
		t.Errorf("the tampered copy ran")
	}
	if left := listDir(t, runs); len(left) > 0 {
		t.Errorf("runs folder holds %q after the watchdog", left)
	}
}

// TestStartWatchdogDetached: a session of its own, stdin the pipe, output
// to the null device, working in /, no child while it waits.
func TestStartWatchdogDetached(t *testing.T) {
	t.Setenv(reaper.EnvDebug, "")
	e := newMemEngine(t)
	cache := t.TempDir()
	runs := runsDir(t, cache)
	wd, err := reaper.StartWatchdog(cache, runs, "0000bbb1", e.plan(t))
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

	// Released, it reaps the run: here a record and a name, neither ever
	// read (the name is another run's sandbox); nothing was told, and
	// nothing carries the run's label.
	_, err = e.open(t).Create(context.Background(), "rz-x-1", backend.Spec{Image: "busybox", RunID: "0000ffff"})
	must(t, err)
	writeRun(t, runs, "0000bbb1", []byte(`{"pid":1,"startedIso":"","backend":"memory"}`), []string{"rz-x-1"}, nil)
	endWatchdog(t, wd)
	if got := e.objects(t); !slices.Equal(got, []string{"sandbox rz-x-1"}) {
		t.Errorf("on the engine after the watchdog: %q, want another run's sandbox rz-x-1 alone", got)
	}
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
