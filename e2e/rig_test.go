//go:build linux

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/keeper"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// Deadlines. None of them is a performance assertion: they bound how long
// a row waits on a loaded 2-core machine before it calls something lost.
const (
	goneWithin  = 60 * time.Second // a watchdog or sweep to remove a run
	readyWithin = 3 * time.Minute  // an owner to start its sandboxes
	exitWithin  = 2 * time.Minute  // an owner to end once told or killed
)

var engineA struct {
	once sync.Once
	e    *harness.Engine
	err  error
}

// mainEngine is the engine every owner uses unless told otherwise.
func mainEngine(t testing.TB) *harness.Engine {
	t.Helper()
	engineA.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		engineA.e, engineA.err = harness.NewEngine(ctx, "")
	})
	if engineA.err != nil {
		t.Fatalf("no engine (run `make engine`): %v", engineA.err)
	}
	return engineA.e
}

// rig is one row's world: a cache dir, the engine, the image, and a
// bystander owner that must come out of the row untouched.
type rig struct {
	t     *testing.T
	cache string
	eng   *harness.Engine
	img   string
	// env is added to every owner of the rig.
	env []string
	by  *owner
}

// newRig makes a rig with its bystander: an owner with a sandbox and a
// network in the same cache dir, alive through the whole row. At the end
// of the row it must still run, with its ledger intact; then it ends
// normally and must leave nothing.
func newRig(t *testing.T) *rig {
	t.Helper()
	r := newBareRig(t)
	r.by = r.bystander(r.eng)
	return r
}

// newBareRig is a rig without a bystander.
func newBareRig(t *testing.T) *rig {
	t.Helper()
	img := testimage.Busybox(t)
	return &rig{t: t, cache: t.TempDir(), eng: mainEngine(t), img: img}
}

// bystander starts an owner on eng (with the rig's env) and registers the
// check that it survived.
func (r *rig) bystander(eng *harness.Engine, env ...string) *owner {
	r.t.Helper()
	b := r.start("bystander", harness.Plan{Containers: 1, Networks: 1}, env...).on(eng).ready()
	r.t.Cleanup(func() {
		b.checkAlive("the bystander, at the end of the row")
		b.finish()
		r.waitGone(b, "the bystander's own cleanup")
	})
	return b
}

// owner is a started owner process. A run started by something else (a
// `go test` of a fixture) is an owner without a Proc.
type owner struct {
	*proctest.Proc
	name string
	// output, when set, is what the process printed (for a fixture).
	output func() string
	r      *rig
	eng    *harness.Engine
	plan   harness.Plan

	run                 string
	watchdog            int
	sandboxes, networks []string
	// volumes are the named volumes a user's test said it made, images
	// the images it built (sandboxtest.NewImage, by name).
	volumes, images []string
}

// start starts an owner of the rig with plan p (the rig's image when p
// has none) and env added. It is killed at the end of the test if it still
// runs, and what its run left on the engine is removed then (after the
// row's assertions, which must have found nothing).
func (r *rig) start(name string, p harness.Plan, env ...string) *owner {
	r.t.Helper()
	return r.startWith(name, p, nil, env...)
}

// startWith is start with a last word on how the process starts (its
// argv, a process group of its own).
func (r *rig) startWith(name string, p harness.Plan, edit func(*proctest.Spec), env ...string) *owner {
	r.t.Helper()
	if p.Image == "" {
		p.Image = r.img
	}
	spec := proctest.Spec{
		Name: name,
		Argv: proctest.TestArgv("TestOwner", "-test.timeout=20m"),
		Env:  harness.OwnerEnv(os.Environ(), r.cache, p, r.ownerEnv(env...)...),
	}
	if edit != nil {
		edit(&spec)
	}
	proc, err := proctest.Start(spec)
	if err != nil {
		r.t.Fatal(err)
	}
	o := &owner{Proc: proc, name: name, r: r, eng: r.eng, plan: p}
	r.t.Cleanup(o.cleanup)
	return o
}

// ownerEnv is what every process of the rig gets besides its plan and
// cache dir: the watchdog's log on, a first-use sweep that finishes (the
// rows judge its every decision, and on a loaded machine the default 5 s
// were seen to end one before its last dead run), the rig's env, then env.
func (r *rig) ownerEnv(env ...string) []string {
	out := append([]string{"RIGHTSIZE_REAPER_DEBUG=1", reaper.EnvSweepBudget + "=2m"}, r.env...)
	return append(out, env...)
}

// userEnv is the environment of a test binary built in a user's module:
// built from nothing, as a user's shell would not hand it this module's
// settings, but with the engine settings this process was given (without
// them, the user's test went to the default socket, Docker's, where a row
// run against Podman found none of what it made; with none, both go to
// the default, as a user's would), then the rig's env, then env.
func (r *rig) userEnv(env ...string) []string {
	var engine []string
	for _, k := range []string{"DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"} {
		if v, ok := os.LookupEnv(k); ok {
			engine = append(engine, k+"="+v)
		}
	}
	return harness.OwnerEnv(nil, r.cache, harness.Plan{}, append(engine, r.ownerEnv(env...)...)...)
}

// sub is the rig for subtest t: same cache dir, engine and bystander.
func (r *rig) sub(t *testing.T) *rig {
	c := *r
	c.t = t
	return &c
}

// on says which engine the owner's sandboxes are on.
func (o *owner) on(e *harness.Engine) *owner { o.eng = e; return o }

// say is what the process printed, for failure messages.
func (o *owner) say() string {
	switch {
	case o.Proc != nil:
		return o.Output()
	case o.output != nil:
		return o.output()
	}
	return ""
}

func (o *owner) cleanup() {
	t := o.r.t
	if o.Proc != nil {
		if err := o.EnsureDead(); err != nil {
			t.Errorf("%s: %v", o.name, err)
		}
	}
	if o.watchdog > 0 && isWatchdog(o.watchdog) {
		// Killed owners' watchdogs have finished by now in a row that
		// passed; one that still runs is stopped, not left behind.
		_ = syscall.Kill(o.watchdog, syscall.SIGKILL)
	}
	if o.run == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	removed, err := o.eng.RemoveRun(ctx, o.run)
	if err != nil {
		t.Errorf("cleanup of run %s: %v", o.run, err)
	}
	// A keeper stays when it was stopped: the run's, removed with it.
	if exists, _, err := o.eng.ContainerState(ctx, keeper.NamePrefix+o.run); err == nil && exists {
		if err := o.eng.Remove(ctx, keeper.NamePrefix+o.run); err != nil {
			t.Errorf("cleanup of run %s: %v", o.run, err)
		}
		removed = append(removed, keeper.NamePrefix+o.run)
	}
	if len(removed) > 0 {
		t.Logf("cleanup removed what run %s (%s) left: %q", o.run, o.name, removed)
	}
}

// isWatchdog reports whether pid runs a watchdog (its argv[0], or the
// script's, is rightsize-watchdog).
func isWatchdog(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(b), "rightsize-watchdog")
}

// waitRun waits for the owner's run id.
func (o *owner) waitRun() *owner {
	o.r.t.Helper()
	v, err := o.Get("run", readyWithin)
	if err != nil {
		o.r.t.Fatal(err)
	}
	o.run = v
	return o
}

// ready waits until the owner has started what its plan says, and reads
// its run, watchdog and names.
func (o *owner) ready() *owner {
	o.r.t.Helper()
	o.waitRun()
	if _, err := o.Get("ready", readyWithin); err != nil {
		o.r.t.Fatal(err)
	}
	o.watchdog, _ = strconv.Atoi(o.get("watchdog"))
	o.sandboxes = split(o.get("sandboxes"))
	o.networks = split(o.get("networks"))
	if len(o.sandboxes) != o.plan.Containers || len(o.networks) != o.plan.Networks {
		o.r.t.Fatalf("%s started %q and %q, its plan says %d and %d", o.Name, o.sandboxes, o.networks, o.plan.Containers, o.plan.Networks)
	}
	return o
}

func (o *owner) get(key string) string {
	v, _ := o.Value(key)
	return v
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// sweepOf returns what the owner's first-use sweep decided about run id:
// decision and reason ("" when it did not see the run; the reason then
// says why the sweep stopped, when it stopped early).
func (o *owner) sweepOf(id string) (decision, reason string) {
	v, ok := o.Value(harness.ReportKey("sweep", id))
	if !ok {
		if u := o.get("sweep.unfinished"); u != "" {
			return "", "not reached: the sweep stopped early: " + u
		}
	}
	return decision2(v)
}

func decision2(v string) (string, string) {
	d, r, _ := strings.Cut(v, "|")
	return d, r
}

// kill SIGKILLs the owner and waits until it is reaped.
func (o *owner) kill() {
	o.r.t.Helper()
	if err := o.Kill(); err != nil {
		o.r.t.Fatalf("kill %s: %v", o.Name, err)
	}
	if !o.Wait(exitWithin) {
		o.r.t.Fatalf("%s did not die of SIGKILL", o.Name)
	}
}

// killSession SIGKILLs the watchdog, then the owner: nothing of the
// session is left to clean up after it.
func (o *owner) killSession() {
	o.r.t.Helper()
	if o.watchdog <= 0 {
		o.r.t.Fatalf("%s has no watchdog", o.Name)
	}
	if err := syscall.Kill(o.watchdog, syscall.SIGKILL); err != nil {
		o.r.t.Fatalf("kill watchdog %d: %v", o.watchdog, err)
	}
	o.kill()
	// The watchdog is a child of the owner, now reparented and reaped by
	// init; wait until no process has its pid.
	poll(o.r.t, exitWithin, "the killed watchdog to be gone", func() (bool, string) {
		return syscall.Kill(o.watchdog, 0) == syscall.ESRCH, fmt.Sprintf("pid %d still exists", o.watchdog)
	})
}

// finish closes the owner's stdin and checks that it ended with exit 0.
func (o *owner) finish() {
	o.r.t.Helper()
	o.CloseStdin()
	if !o.Wait(exitWithin) {
		o.r.t.Fatalf("%s did not end within %s of its stdin closing", o.Name, exitWithin)
	}
	if _, err := o.Exited(); err != nil {
		o.r.t.Errorf("%s: %v\n%s", o.Name, err, o.Output())
	}
}

// checkAlive checks that the owner's sandboxes run, its networks exist,
// and its ledger files list exactly them.
func (o *owner) checkAlive(who string) {
	t := o.r.t
	t.Helper()
	ctx := context.Background()
	for _, n := range o.sandboxes {
		exists, running, err := o.eng.ContainerState(ctx, n)
		if err != nil {
			t.Errorf("%s: %v", who, err)
		} else if !running {
			t.Errorf("%s: container %s exists=%v running=%v; it must be running", who, n, exists, running)
		}
	}
	for _, n := range o.networks {
		if ok, err := o.eng.NetworkExists(ctx, n); err != nil || !ok {
			t.Errorf("%s: network %s exists=%v (%v)", who, n, ok, err)
		}
	}
	o.checkListed(who, true)
}

// checkListed checks that the run's record is there and that its line
// files list the owner's names: exactly them, or at least them.
func (o *owner) checkListed(who string, exactly bool) {
	t := o.r.t
	t.Helper()
	_, sbx, nets := ledger.Paths(harness.RunsDir(o.r.cache), o.run)
	if _, err := os.Stat(ledger.OwnRecordPath(harness.RunsDir(o.r.cache), o.run)); err != nil {
		t.Errorf("%s: the record of run %s: %v", who, o.run, err)
	}
	for _, l := range []struct {
		path string
		want []string
	}{{sbx, o.sandboxes}, {nets, o.networks}} {
		got, err := harness.ListedNames(l.path)
		if err != nil {
			t.Errorf("%s: %v", who, err)
		}
		if exactly {
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(l.want))) {
				t.Errorf("%s: %s lists %q, want %q", who, filepath.Base(l.path), got, l.want)
			}
			continue
		}
		for _, n := range l.want {
			if !slices.Contains(got, n) {
				t.Errorf("%s: %s no longer lists %s (it lists %q)", who, filepath.Base(l.path), n, got)
			}
		}
	}
}

// leftovers says what of the owner's run is still there: on its engine
// (by label, and its networks by name) and in the ledger. "" when nothing.
func (o *owner) leftovers() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left, err := o.eng.RunLeft(ctx, o.run, o.networks)
	if err != nil {
		return "engine: " + err.Error()
	}
	if pids := proctree.Live(proctree.OfRun(o.run)); len(pids) > 0 {
		if left != "" {
			left += ", "
		}
		left += fmt.Sprintf("processes %v", pids)
	}
	if files := harness.RunFiles(o.r.cache, o.run); len(files) > 0 {
		if left != "" {
			left += ", "
		}
		left += fmt.Sprintf("ledger files %q", files)
	}
	return left
}

// waitGone polls until nothing of the owner's run is left, and fails the
// test, saying what is left and what the watchdog logged, after
// goneWithin. It returns how long it waited.
func (r *rig) waitGone(o *owner, what string) time.Duration {
	r.t.Helper()
	took, left := r.goneWithin(o, goneWithin)
	if left != "" {
		r.t.Fatalf("%s: after %s, run %s of %s still has %s\nwatchdog log:\n%s\nowner output:\n%s",
			what, goneWithin, o.run, o.name, left, r.watchdogLog(o.run), o.say())
	}
	return took
}

// waitWatchdogsDone polls until no watchdog of the owner's run lives (its
// mark in the fates folder names none), and fails the test after
// goneWithin.
func (r *rig) waitWatchdogsDone(o *owner) {
	r.t.Helper()
	poll(r.t, goneWithin, "the watchdogs of run "+o.run+" to finish", func() (bool, string) {
		pid := ledger.LiveWatchdog(r.cache, o.run)
		return pid == 0, fmt.Sprintf("watchdog pid %d", pid)
	})
}

// goneWithin polls until nothing of the owner's run is left, or timeout;
// it returns how long it waited and what was left ("" when nothing).
func (r *rig) goneWithin(o *owner, timeout time.Duration) (time.Duration, string) {
	r.t.Helper()
	if o.run == "" {
		r.t.Fatalf("%s: no run id", o.name)
	}
	start := time.Now()
	for {
		left := o.leftovers()
		if left == "" || time.Since(start) > timeout {
			return time.Since(start), left
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// watchdogLog is what the watchdog of run id logged (RIGHTSIZE_REAPER_DEBUG).
func (r *rig) watchdogLog(id string) string { return readLog(reaper.LogPath(r.cache, id, false)) }

// processWatchdogLog is the log of run id's watchdog of local processes,
// the native one beside a script watchdog ("(…)" when there is none).
func (r *rig) processWatchdogLog(id string) string {
	return readLog(reaper.LogPath(r.cache, id, true))
}

func readLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(b)
}

// poll waits until cond holds, failing the test after timeout with cond's
// last word on it.
func poll(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, detail := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("waited %s for %s: %s", timeout, what, detail)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// ms rounds a duration for logs.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
