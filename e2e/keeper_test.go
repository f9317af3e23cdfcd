//go:build linux

package e2e_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/reaper"
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

// A sweep from any machine (here: a cache dir of its own, which knows
// nothing of the runs) reaps a kept run whose keeper is gone for longer
// than the lease timeout, and leaves a dead run that never had a keeper:
// its containers carry no mark, and the absence of a keeper says nothing
// of it. The keeper is killed by the engine (SIGKILL: it removes nothing),
// as an engine's restart or an operator's docker kill would end it.
func TestKeeperSweepFromAnyMachine(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	kept := startKept(r, "kept owner", harness.Plan{Containers: 2, Networks: 1})
	plain := r.start("plain owner", harness.Plan{Containers: 1}).ready()
	ctx := context.Background()
	if _, err := kept.eng.Client().ContainerKill(ctx, "rz-keeper-"+kept.run, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatalf("kill the keeper: %v\nwatchdog log:\n%s", err, r.watchdogLog(kept.run))
	}
	poll(t, goneWithin, "the killed keeper to be gone", func() (bool, string) {
		exists, _, err := kept.eng.ContainerState(ctx, "rz-keeper-"+kept.run)
		return err == nil && !exists, fmt.Sprintf("exists=%v, %v", exists, err)
	})
	kept.killSession()
	plain.killSession()

	drv, err := docker.OpenHost(r.eng.Client().DaemonHost())
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	// Any sweep on this engine may reap the run once its lease timeout
	// has passed (another test's owner, another engineer's): what counts
	// is that it goes, and what this sweep says of it when it is the one.
	elsewhere := t.TempDir()
	var rep *reaper.Report
	took := poll(t, goneWithin, "a sweep from elsewhere to reap the kept run", func() (bool, string) {
		rep, err = reaper.Sweep(ctx, drv, reaper.WithCacheDir(elsewhere))
		if err != nil {
			return false, err.Error()
		}
		rr, ok := rep.Run(kept.run)
		switch {
		case ok && rr.Decision == reaper.Kept:
			// Another sweep was removing the same containers ("removal
			// already in progress"): kept for now, judged dead all the
			// same; the next look finds them gone.
			return false, fmt.Sprintf("kept for now: %v", rr.Kept)
		case ok && (rr.Decision != reaper.Reaped || len(rr.Removed) == 0):
			t.Fatalf("the kept run: %s (%s), removed %v, kept %v; want it reaped", rr.Decision, rr.Reason, rr.Removed, rr.Kept)
		}
		left, err := kept.eng.RunLeft(ctx, kept.run, kept.networks)
		if err != nil {
			return false, err.Error()
		}
		return left == "", "run " + kept.run + " still has " + left
	})
	if _, ok := rep.Run(plain.run); ok {
		t.Errorf("the sweep judged run %s, which never had a keeper", plain.run)
	}
	for _, n := range plain.sandboxes {
		if exists, _, err := plain.eng.ContainerState(ctx, n); err != nil || !exists {
			t.Errorf("container %s of a run that never had a keeper: exists=%v (%v); the sweep from elsewhere must leave it", n, exists, err)
		}
	}
	t.Logf("keeper killed → the kept run reaped by a sweep from elsewhere %s after the machine's death (lease %s)", ms(took), keeperLease)
}
