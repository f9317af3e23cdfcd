package keeper

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/proctest"
)

// envHold names the keeper TestHolderProcess holds, envSecret its lease's
// secret.
const (
	envHold   = "RZ_KEEPER_TEST_HOLD"
	envSecret = "RZ_KEEPER_TEST_SECRET"
)

// TestHolderProcess is the holder of the tests below: this test binary,
// re-executed, holds the lease of the keeper envHold names, on the engine
// DOCKER_HOST names, says so, and waits until it is killed or stopped.
func TestHolderProcess(t *testing.T) {
	ref := os.Getenv(envHold)
	if ref == "" {
		t.Skip("the holder process of this package's tests")
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := Hold(ctx, cli, ref, os.Getenv(envSecret))
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("held", l.Keeper)
	proctest.Block()
	_ = l.Close()
}

// holder starts a process holding k's lease.
func holder(t *testing.T, k *Keeper) *proctest.Helper {
	t.Helper()
	h := proctest.StartHelper(t, proctest.Spec{
		Name: "holder of " + k.Name,
		Argv: proctest.TestArgv("TestHolderProcess", "-test.timeout=5m"),
		Env:  proctest.Environ(func(k string) bool { return k == envHold || k == envSecret }, envHold+"="+k.ID, envSecret+"="+k.Secret),
	})
	if got := h.Expect("held"); got != k.Name {
		t.Fatalf("the holder holds %q, want %q", got, k.Name)
	}
	return h
}

// processState is the state letter of /proc/<pid>/stat: R, S, T (stopped)…
func processState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	// pid (comm) state …; comm may hold spaces and parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return "?"
}

// A holder SIGKILLed mid-lease: the kernel closes its connection, the
// keeper's stdin ends, the run's containers go, well within the (long)
// lease timeout, which therefore cannot be what ended it.
func TestKilledHolderEndsTheLease(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	const timeout = 5 * time.Minute
	k := r.start(run, Options{LeaseTimeout: timeout})
	h := holder(t, k)
	ctrs := []string{r.container("rz-"+run+"-1", runLabels(run)), r.container("rz-"+run+"-2", runLabels(run))}
	h.KillAndWait()
	killed := h.KilledAt()
	r.allGone(time.Minute, "the run's containers after their holder's SIGKILL", ctrs, nil)
	t.Logf("SIGKILL of the holder → the run's 2 containers gone: %s (lease timeout %s)", time.Since(killed).Round(time.Millisecond), timeout)
	r.keeperGone(time.Minute, k.Name)
}

// A frozen holder (SIGSTOP: its connection stays open, no heartbeat
// comes): the run's containers go once the lease timeout has passed, and
// not before, while the holder is still there, stopped.
func TestFrozenHolderLosesTheLease(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	const timeout = 2 * time.Second
	k := r.start(run, Options{LeaseTimeout: timeout})
	h := holder(t, k)
	ctrs := []string{r.container("rz-"+run+"-1", runLabels(run)), r.container("rz-"+run+"-2", runLabels(run))}
	if err := h.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	defer h.Signal(syscall.SIGCONT)
	proctest.WaitUntil(t, 10*time.Second, "the holder to be stopped", func() bool { return processState(h.Pid()) == "T" })
	r.allGone(time.Minute, "the run's containers after their holder froze", ctrs, nil)
	// The last heartbeat may have come up to one interval before the stop.
	if took, least := time.Since(stopped), timeout-heartbeatEvery(timeout); took < least {
		t.Errorf("the containers went %s after the holder froze, before the lease timeout of %s could pass (%s after the last heartbeat at the earliest): not the timeout's doing", took, timeout, least)
	}
	if st := processState(h.Pid()); st != "T" {
		t.Errorf("the holder is %q, not stopped: its connection may have closed, and EOF ended the lease", st)
	}
	t.Logf("SIGSTOP of the holder → the run's 2 containers gone: %s (lease timeout %s)", time.Since(stopped).Round(time.Millisecond), timeout)
	r.keeperGone(time.Minute, k.Name)
}

// The keeper's memory while it waits, as the host sees its process.
func TestKeeperMemory(t *testing.T) {
	proctest.NeedHostPidNamespace(t)
	r := newRig(t)
	k := r.start(newRunID(t), Options{})
	hold(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.cli.ContainerInspect(ctx, k.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid := res.Container.State.Pid
	if pid <= 0 {
		t.Fatalf("the engine gives the keeper's pid as %d", pid)
	}
	kib, err := proctest.VmRSSKiB(pid)
	if err != nil {
		t.Fatalf("VmRSS of the keeper's process %d: %v", pid, err)
	}
	t.Logf("the keeper (host pid %d), holding its lease: VmRSS %d KiB (%.1f MiB)", pid, kib, float64(kib)/1024)
	if kib <= 0 {
		t.Errorf("VmRSS of %d KiB", kib)
	}
}
