//go:build linux

package e2e_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/keeper"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/usermod"
)

// The machine's deaths, with the engine-side keeper (RIGHTSIZE_WATCHDOG=
// engine) on the local engine: the "machine" is the owner and its
// watchdog, everything of this run on this side of the engine's API. A
// short lease keeps the rows short; it is a lower bound of the freeze's
// wait, never an assertion of speed.
const keeperLease = 2 * time.Second

// ownerPause is how long TestKeeperOwnerPaused holds its test binary
// stopped: the 20 s of a look in a debugger.
const ownerPause = 10 * keeperLease

// keeperEnv is what a kept owner gets.
func keeperEnv() []string {
	return []string{"RIGHTSIZE_WATCHDOG=engine", "RIGHTSIZE_LEASE_TIMEOUT=" + keeperLease.String()}
}

// startKept starts an owner whose watchdog holds a keeper's lease, and
// checks that the keeper runs.
func startKept(r *rig, name string, p harness.Plan) *owner {
	r.t.Helper()
	o := r.start(name, p, keeperEnv()...).ready()
	if o.watchdog <= 0 {
		r.t.Fatalf("%s has no watchdog: %s", name, o.say())
	}
	if kind := o.get("watchdog.kind"); kind != "native" {
		r.t.Fatalf("%s has a %s watchdog; the keeper's lease needs the native one: %s", name, kind, o.say())
	}
	o.checkKeeper(true, "after its start")
	return o
}

// checkKeeper checks whether the run's keeper runs.
func (o *owner) checkKeeper(want bool, when string) {
	o.r.t.Helper()
	_, running, err := o.eng.ContainerState(context.Background(), "rz-keeper-"+o.run)
	if err != nil {
		o.r.t.Fatal(err)
	}
	if running != want {
		o.r.t.Fatalf("%s, %s: its keeper running=%v, want %v\nwatchdog log:\n%s\nowner output:\n%s", o.name, when, running, want, o.r.watchdogLog(o.run), o.say())
	}
}

// engineGone polls until nothing of the owner's run is on the engine,
// then until its keeper is gone too, and returns how long each took. The
// ledger's files are not looked at: they are the dead machine's, which
// nothing here reads.
func (o *owner) engineGone(what string, within time.Duration) (run, keeper time.Duration) {
	o.r.t.Helper()
	start := time.Now()
	poll(o.r.t, within, what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		left, err := o.eng.RunLeft(ctx, o.run, o.networks)
		if err != nil {
			return false, err.Error()
		}
		return left == "", fmt.Sprintf("run %s still has %s\nwatchdog log:\n%s", o.run, left, o.r.watchdogLog(o.run))
	})
	run = time.Since(start)
	poll(o.r.t, within, what+" (the keeper itself)", func() (bool, string) {
		exists, _, err := o.eng.ContainerState(context.Background(), "rz-keeper-"+o.run)
		return err == nil && !exists, fmt.Sprintf("keeper exists=%v (%v)", exists, err)
	})
	return run, time.Since(start)
}

// The machine killed: SIGKILL of the owner and its watchdog at once, so
// that nothing of this side is left to reap. The keeper's stdin ends with
// the watchdog's connection, and it removes the run's containers and
// networks, then itself.
func TestKeeperMachineKilled(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	o := startKept(r, "kept owner", harness.Plan{Containers: 3, Networks: 1})
	o.checkAlive("the kept owner, before the kill")
	o.killSession()
	run, kept := o.engineGone("the keeper, after SIGKILL of the owner and its watchdog", goneWithin)
	t.Logf("SIGKILL of owner and watchdog → 3 containers and 1 network gone in %s, the keeper in %s (polled every 25 ms)", ms(run), ms(kept))
}

// The machine frozen: SIGSTOP of the owner and its watchdog, their
// connections left open. No heartbeat comes; after the lease timeout the
// keeper removes the run.
func TestKeeperMachineFrozen(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	o := startKept(r, "frozen owner", harness.Plan{Containers: 3, Networks: 1})
	o.checkAlive("the frozen owner, before the freeze")
	for _, pid := range []int{o.watchdog, o.Pid()} {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP %d: %v", pid, err)
		}
	}
	t.Cleanup(func() {
		// Killed by the owner's cleanup; continued first, so that no
		// stopped process outlives the test.
		_ = syscall.Kill(o.watchdog, syscall.SIGCONT)
		_ = syscall.Kill(o.Pid(), syscall.SIGCONT)
	})
	run, kept := o.engineGone("the keeper, after the owner and its watchdog froze", keeperLease+goneWithin)
	// The keeper counts the lease from the last heartbeat it got, which
	// can come up to a fifth of the lease before the freeze: the run may
	// go that much early, never much earlier.
	if early := keeperLease - keeperLease/4; run < early {
		t.Fatalf("the run went %s after the freeze, before its lease of %s (less a heartbeat's interval, %s) could end: something else removed it", ms(run), keeperLease, ms(early))
	}
	t.Logf("SIGSTOP of owner and watchdog → 3 containers and 1 network gone %s after the freeze, the keeper %s (lease %s)", ms(run), ms(kept), keeperLease)
}

// Only the test binary paused (a debugger's breakpoint) for 20 s, ten
// lease timeouts: the watchdog holds the lease, and nothing is removed. Then
// the owner ends normally, and so does its keeper.
func TestKeeperOwnerPaused(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	o := startKept(r, "paused owner", harness.Plan{Containers: 2, Networks: 1})
	if err := syscall.Kill(o.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(o.Pid(), syscall.SIGCONT) })
	// What is asserted is an absence: it needs the time itself.
	time.Sleep(ownerPause)
	o.checkAlive("the paused owner, after ten lease timeouts")
	o.checkKeeper(true, "after ten lease timeouts of its owner's pause")
	if err := syscall.Kill(o.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	o.checkAlive("the owner, continued")
	o.finish()
	r.waitGone(o, "the owner's own end")
	_, _ = o.engineGone("the keeper, after its owner's normal end", goneWithin)
	// Its fate is written last, into the rig's cache dir: not after the
	// test has removed that.
	r.waitWatchdogsDone(o)
}

// keeperOf is the owner's keeper container, as the engine has it.
func (o *owner) keeperOf() client.ContainerInspectResult {
	o.r.t.Helper()
	res, err := o.eng.Client().ContainerInspect(context.Background(), keeper.NamePrefix+o.run, client.ContainerInspectOptions{})
	if err != nil {
		o.r.t.Fatalf("%s's keeper: %v", o.name, err)
	}
	return res
}

// machineDiesKeeperEnds is the death of the owner's whole machine while
// its keeper ends without removing anything (the engine killed it, or
// restarted); see rig.machineDiesKeeperEnds.
func (o *owner) machineDiesKeeperEnds() time.Time {
	o.r.t.Helper()
	return o.r.machineDiesKeeperEnds(o.run, o.killSession)
}

// machineDiesKeeperEnds freezes the keeper of run (SIGSTOP to its
// process, as this host sees it), so that neither its lease's end nor its
// holder can act; then kill kills the machine (the owner and its
// watchdog), then the keeper is killed through the engine. It returns
// when the keeper stopped.
func (r *rig) machineDiesKeeperEnds(run string, kill func()) time.Time {
	r.t.Helper()
	t := r.t
	ctx := context.Background()
	name := keeper.NamePrefix + run
	res, err := r.eng.Client().ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("run %s's keeper: %v", run, err)
	}
	st := res.Container.State
	if st == nil || st.Pid <= 0 {
		t.Fatalf("the engine gives the keeper's pid as %v", st)
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/cmdline"); err != nil || !strings.HasPrefix(string(b), "/keeper") {
		t.Skipf("the keeper's process %d is not this host's to freeze (cmdline %q, %v)", st.Pid, b, err)
	}
	if err := syscall.Kill(st.Pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP the keeper's process %d: %v", st.Pid, err)
	}
	kill()
	if _, err := r.eng.Client().ContainerKill(ctx, name, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatalf("kill the keeper: %v", err)
	}
	poll(t, goneWithin, "the killed keeper to stop", func() (bool, string) {
		exists, running, err := r.eng.ContainerState(ctx, name)
		return err == nil && exists && !running, fmt.Sprintf("exists=%v running=%v, %v", exists, running, err)
	})
	return time.Now()
}

// sweepElsewhere polls a sweep from elsewhere (a cache dir of its own,
// which knows nothing of the runs) until what the run has on the engine
// (its containers ctrs and networks nets, by id or name) is gone, and
// checks what it said of the run when it was the one to reap it: any
// sweep on this engine may reap the run once its lease timeout has passed
// (another test's owner, another engineer's). It returns how long it
// polled.
func (r *rig) sweepElsewhere(run string, ctrs, nets []string) time.Duration {
	r.t.Helper()
	t := r.t
	ctx := context.Background()
	drv, err := docker.OpenHost(r.eng.Client().DaemonHost())
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	elsewhere := t.TempDir()
	return poll(t, goneWithin, "a sweep from elsewhere to reap run "+run, func() (bool, string) {
		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(elsewhere))
		if err != nil {
			return false, err.Error()
		}
		rr, ok := rep.Run(run)
		switch {
		case ok && rr.Decision == reaper.Kept:
			// Another sweep was removing the same containers ("removal
			// already in progress"): kept for now, judged dead all the
			// same; the next look finds them gone.
			return false, fmt.Sprintf("kept for now: %v", rr.Kept)
		case ok && (rr.Decision != reaper.Reaped || len(rr.Removed) == 0):
			t.Fatalf("run %s: %s (%s), removed %v, kept %v; want it reaped", run, rr.Decision, rr.Reason, rr.Removed, rr.Kept)
		}
		var left []string
		for _, id := range ctrs {
			if exists, _, err := r.eng.ContainerState(ctx, id); err != nil || exists {
				left = append(left, fmt.Sprintf("container %s (%v)", id, err))
			}
		}
		for _, n := range nets {
			if exists, err := r.eng.NetworkExists(ctx, n); err != nil || exists {
				left = append(left, fmt.Sprintf("network %s (%v)", n, err))
			}
		}
		if exists, _, err := r.eng.ContainerState(ctx, keeper.NamePrefix+run); err != nil || exists {
			left = append(left, fmt.Sprintf("its stopped keeper (%v)", err))
		}
		return len(left) == 0, "run " + run + " still has " + strings.Join(left, ", ")
	})
}

// A sweep from any machine (here: a cache dir of its own, which knows
// nothing of the runs) reaps a kept run whose machine died and whose
// keeper ended without removing anything (killed by the engine, as an
// engine's restart or an operator's docker kill would end it), once the
// keeper has been stopped for longer than the lease timeout, and removes
// the stopped keeper too; it leaves a dead run that never had a keeper:
// its containers carry no mark, and the absence of a keeper says nothing
// of it.
func TestKeeperSweepFromAnyMachine(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	kept := startKept(r, "kept owner", harness.Plan{Containers: 2, Networks: 1})
	plain := r.start("plain owner", harness.Plan{Containers: 1}).ready()
	ctx := context.Background()
	stopped := kept.machineDiesKeeperEnds()
	plain.killSession()

	took := r.sweepElsewhere(kept.run, kept.sandboxes, kept.networks)
	rep, err := reaper.Sweep(ctx, mustOpenHost(t, r), reaper.WithCacheDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rep.Run(plain.run); ok {
		t.Errorf("the sweep judged run %s, which never had a keeper", plain.run)
	}
	for _, n := range plain.sandboxes {
		if exists, _, err := plain.eng.ContainerState(ctx, n); err != nil || !exists {
			t.Errorf("container %s of a run that never had a keeper: exists=%v (%v); the sweep from elsewhere must leave it", n, exists, err)
		}
	}
	if since := time.Since(stopped); since < keeperLease {
		t.Errorf("the kept run went %s after its keeper stopped, within its lease of %s: its keeper's stop is its sign of life until then", ms(since), keeperLease)
	}
	t.Logf("machine dead, keeper killed → the kept run and its stopped keeper reaped by a sweep from elsewhere %s after (lease %s)", ms(took), keeperLease)
}

// A kept run whose last trace on the engine is a network, or a volume, is
// reaped by the next sweep from any machine: they carry the kept mark
// too. A sweep that removed the run's containers and its stopped keeper
// but not these (their removal refused, for example while another sweep
// from elsewhere, as the e2e tests run side by side, was still removing a
// container using them) left them so. Seen once in a full run, as
// TestKeeperSweepFromAnyMachine waiting a minute on such a network; here
// that state is made directly.
func TestKeeperNetworkVolumeLeft(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	cli := r.eng.Client()
	// Two runs: one left a network, the other a volume.
	run, err := ledger.NewRunID()
	if err != nil {
		t.Fatal(err)
	}
	volRun, err := ledger.NewRunID()
	if err != nil {
		t.Fatal(err)
	}
	marks := func(run string) map[string]string {
		return map[string]string{docker.LabelRunID: run, docker.LabelRunIDAlt: run, docker.LabelKept: keeperLease.String()}
	}
	netName, volName := "rz-net-"+run, "rz-vol-"+volRun
	created, err := cli.NetworkCreate(ctx, netName, client.NetworkCreateOptions{Labels: marks(run)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := cli.NetworkRemove(context.Background(), created.ID, client.NetworkRemoveOptions{}); err == nil {
			t.Logf("cleanup removed network %s, which no sweep did", netName)
		}
	})
	if _, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: volName, Labels: marks(volRun)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := cli.VolumeRemove(context.Background(), volName, client.VolumeRemoveOptions{}); err == nil {
			t.Logf("cleanup removed volume %s, which no sweep did", volName)
		}
	})
	took := r.sweepElsewhere(run, nil, []string{netName})
	drv := mustOpenHost(t, r)
	elsewhere := t.TempDir()
	poll(t, goneWithin, "a sweep from elsewhere to reap the other kept run's volume", func() (bool, string) {
		if _, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(elsewhere)); err != nil {
			return false, err.Error()
		}
		_, err := cli.VolumeInspect(ctx, volName, client.VolumeInspectOptions{})
		return harness.NotFound(err), fmt.Sprintf("volume %s: %v", volName, err)
	})
	t.Logf("a kept run's lone network reaped by a sweep from elsewhere %s after its creation (lease %s); the other's lone volume too", ms(took), keeperLease)
}

// mustOpenHost is a driver of the rig's engine, for a sweep from
// elsewhere; closed when the test ends.
func mustOpenHost(t *testing.T, r *rig) *docker.Driver {
	t.Helper()
	drv, err := docker.OpenHost(r.eng.Client().DaemonHost())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

// A keeper that ends while its owner lives (the engine killed it, or
// restarted, or a person stopped it) is started again by the run's
// watchdog, which holds its lease again: a sweep from elsewhere, after
// the lease timeout, leaves the live run alone, and so does one while
// the keeper is still stopped (its watchdog frozen meanwhile): the stop
// is the run's sign of life until a lease timeout has passed since.
// Then the owner ends normally, and its keeper with it.
func TestKeeperRestarted(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	o := startKept(r, "kept owner", harness.Plan{Containers: 2, Networks: 1})
	ctx := context.Background()
	cli := o.eng.Client()
	drv := mustOpenHost(t, r)
	sweepSparesIt := func(when string) {
		t.Helper()
		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		if rr, ok := rep.Run(o.run); ok {
			t.Fatalf("%s: a sweep from elsewhere decided %s (%s) for the live run %s", when, rr.Decision, rr.Reason, o.run)
		}
		o.checkAlive("the kept owner, " + when)
	}

	// Killed by the engine while the owner lives: its watchdog starts it
	// again and holds it.
	first := o.keeperOf()
	killed := time.Now()
	if _, err := cli.ContainerKill(ctx, first.Container.ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	held := "holding the lease of keeper " + keeper.NamePrefix + o.run + " again"
	poll(t, goneWithin, "the killed keeper to be started again and held", func() (bool, string) {
		log := r.watchdogLog(o.run)
		return strings.Contains(log, held), "watchdog log:\n" + log
	})
	o.checkKeeper(true, "once its watchdog started it again")
	// A sweep judges by time: past the lease timeout since the kill, and
	// since the youngest of the run's containers was made.
	time.Sleep(time.Until(killed.Add(keeperLease + 2*time.Second)))
	sweepSparesIt("a lease timeout after its keeper was killed and started again")

	// Stopped while its watchdog is frozen, so that it stays stopped: a
	// sweep then spares the run, whose containers are older than their
	// lease, for the keeper stopped a moment ago.
	st := o.keeperOf().Container.State
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/cmdline"); err != nil || !strings.HasPrefix(string(b), "/keeper") {
		t.Skipf("the keeper's process %d is not this host's to freeze (cmdline %q, %v)", st.Pid, b, err)
	}
	// The keeper frozen first: the watchdog's freeze cannot end its lease.
	if err := syscall.Kill(st.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(o.watchdog, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(o.watchdog, syscall.SIGCONT) })
	if _, err := cli.ContainerKill(ctx, keeper.NamePrefix+o.run, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	poll(t, goneWithin, "the keeper to stop", func() (bool, string) {
		exists, running, err := o.eng.ContainerState(ctx, keeper.NamePrefix+o.run)
		return err == nil && exists && !running, fmt.Sprintf("exists=%v running=%v, %v", exists, running, err)
	})
	sweepSparesIt("its keeper stopped a moment ago, its watchdog frozen")
	if err := syscall.Kill(o.watchdog, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	poll(t, goneWithin, "the stopped keeper to be started again", func() (bool, string) {
		_, running, err := o.eng.ContainerState(ctx, keeper.NamePrefix+o.run)
		return err == nil && running, fmt.Sprintf("running=%v, %v\nwatchdog log:\n%s", running, err, r.watchdogLog(o.run))
	})
	o.checkAlive("the kept owner, its keeper started again")

	o.finish()
	r.waitGone(o, "the owner's own end")
	_, _ = o.engineGone("the keeper, after its owner's normal end", goneWithin)
	r.waitWatchdogsDone(o)
}

// A stranger's attach to a live run's keeper — `docker attach` with its
// input at its end (a script, a person's Ctrl-D, an IDE's), another
// attach beside it, the Ctrl-C a docker attach passes on — changes
// nothing: the run's own watchdog holds the lease on, for more than two
// lease timeouts, and the run ends normally.
func TestKeeperStrangerAttach(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	o := startKept(r, "kept owner", harness.Plan{Containers: 2, Networks: 1})
	o.strangerAttach()
	o.finish()
	r.waitGone(o, "the owner's own end")
	_, _ = o.engineGone("the keeper, after its owner's normal end", goneWithin)
	r.waitWatchdogsDone(o)
}

// The user's path, kept: a test binary built as a user builds one
// (internal/usermod: a module of its own, the public packages, no
// TestMain) with RIGHTSIZE_WATCHDOG=engine gets its keeper from
// sandboxtest's init; a stranger's attach changes nothing; its machine
// killed (the binary and its watchdog), the keeper removes the run.
func TestKeeperUserModule(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	bin := usermod.Build(t, usermod.Store)
	// The engine the rig uses (Podman's, in the Podman gate), and what
	// building the keeper image needs where the engine has none yet.
	env := append(keeperEnv(), "DOCKER_HOST="+r.eng.Client().DaemonHost(), "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
	o := r.startUser("the user's kept test", bin, "20m", false, env...)
	if o.watchdog = ledger.LiveWatchdog(r.cache, o.run); o.watchdog <= 0 {
		t.Fatalf("the user's test has no live watchdog\n%s", o.say())
	}
	o.checkKeeper(true, "after its start")
	o.strangerAttach()
	o.killSession()
	run, kept := o.engineGone("the keeper, after SIGKILL of the user's test and its watchdog", goneWithin)
	t.Logf("SIGKILL of the user's test and its watchdog → its sandboxes and network gone in %s, the keeper in %s", ms(run), ms(kept))
}

// strangerAttach attaches to the owner's keeper as strangers would, and
// checks, over more than two lease timeouts, that it changed nothing.
func (o *owner) strangerAttach() {
	t := o.r.t
	t.Helper()
	ctx := context.Background()
	cli := o.eng.Client()
	name := keeper.NamePrefix + o.run
	for range 2 {
		att, err := cli.ContainerAttach(ctx, name, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
		if err != nil {
			t.Logf("attach to the keeper: %v (an engine that refuses it leaves the keeper as it was)", err)
			continue
		}
		go io.Copy(io.Discard, att.Reader)
		_, _ = att.Conn.Write([]byte("H.\x04"))
		_ = att.CloseWrite()
		defer att.Close()
	}
	if docker, err := exec.LookPath("docker"); err == nil {
		cmd := exec.Command(docker, "attach", name)
		cmd.Env = append(os.Environ(), "DOCKER_HOST="+cli.DaemonHost())
		if err := cmd.Start(); err != nil { // stdin: the null device, at its end
			t.Fatal(err)
		}
		defer func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}()
	}
	if _, err := cli.ContainerKill(ctx, name, client.ContainerKillOptions{Signal: "SIGINT"}); err != nil {
		t.Fatal(err)
	}
	// An absence, over more than two lease timeouts.
	time.Sleep(2*keeperLease + time.Second)
	o.checkAlive(o.name + ", after a stranger's attach")
	o.checkKeeper(true, "after a stranger's attach")
	if log := o.r.watchdogLog(o.run); strings.Contains(log, "lease ended") {
		t.Errorf("the watchdog lost its lease to a stranger's attach:\n%s", log)
	}
}

// A kept run's containers made by code that knows nothing of rightsize,
// under GuardAll (testcontainers-go, a module, the Docker client, docker
// run, a network), carry the kept mark as its Start sandboxes do; once
// its machine died and its keeper ended without removing anything, a
// sweep from elsewhere reaps them all, and its stopped keeper.
func TestKeeperGuardAll(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	bin := buildGuardFixture(t)
	cli := r.eng.Client()
	ctx := context.Background()
	tag := nonceHex(t)
	t.Cleanup(func() { removeTagged(t, cli, tag) })
	f := startGuardFixtureTest(t, bin, "TestCreateEverything", r.cache, r.img, tag, "guard", "block", keeperEnv()...)
	run := f.get("run")
	cs, ns := f.ids()
	if len(run) != 1 || len(cs) < 3 || len(ns) != 1 {
		t.Fatalf("the fixture said run %q, containers %q, networks %q:\n%s", run, cs, ns, f.output())
	}
	t.Cleanup(func() {
		// What a failed row left: the run's, and its keeper.
		if _, err := r.eng.RemoveRun(context.Background(), run[0]); err != nil {
			t.Errorf("cleanup of run %s: %v", run[0], err)
		}
		_ = r.eng.Remove(context.Background(), keeper.NamePrefix+run[0])
	})
	for _, id := range cs {
		res, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := res.Container.Config.Labels
		if l[docker.LabelRunID] != run[0] || l[docker.LabelKept] != keeperLease.String() {
			t.Errorf("container %s made under GuardAll carries run %q and kept mark %q; want run %s and %s", short(id), l[docker.LabelRunID], l[docker.LabelKept], run[0], keeperLease)
		}
	}
	nres, err := cli.NetworkInspect(ctx, ns[0], client.NetworkInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := nres.Network.Labels; l[docker.LabelRunID] != run[0] || l[docker.LabelKept] != keeperLease.String() {
		t.Errorf("the network made under GuardAll carries %v; want run %s and the kept mark %s", l, run[0], keeperLease)
	}
	wd := ledger.LiveWatchdog(r.cache, run[0])
	if wd <= 0 {
		t.Fatalf("no live watchdog of run %s:\n%s", run[0], f.output())
	}

	stopped := r.machineDiesKeeperEnds(run[0], func() {
		for _, pid := range []int{wd, f.cmd.Process.Pid} {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("SIGKILL %d: %v", pid, err)
			}
		}
		<-f.done
		poll(t, exitWithin, "the killed watchdog to be gone", func() (bool, string) {
			return syscall.Kill(wd, 0) == syscall.ESRCH, fmt.Sprintf("pid %d still exists", wd)
		})
	})
	for _, id := range cs {
		if exists, _, err := r.eng.ContainerState(ctx, id); err != nil || !exists {
			t.Fatalf("container %s is gone before any sweep (%v): the keeper or the watchdog removed it, and the row proves nothing", short(id), err)
		}
	}
	r.sweepElsewhere(run[0], cs, ns)
	t.Logf("GuardAll run: machine dead, keeper killed → its %d containers and network reaped by a sweep from elsewhere %s after the keeper stopped (lease %s)", len(cs), ms(time.Since(stopped)), keeperLease)
}
