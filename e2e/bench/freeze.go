//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// freeze measures the machine frozen (every process of the test's side
// SIGSTOPped, its connections left open) with each reaper: rightsize with
// an engine-side keeper (RIGHTSIZE_WATCHDOG=engine, its default lease)
// and testcontainers-go with Ryuk (or the stand-in), which reaps only on
// a closed connection. The figure is the freeze to the last destroy
// event, or that nothing was destroyed within -freeze-wait.
func (b *bench) freeze(ctx context.Context, ns []int, runs int, ryukMode string, wait time.Duration) error {
	prefix, what, undo, err := b.reaperSetup(ctx, ryukMode)
	if err != nil {
		return err
	}
	defer undo()
	cache, err := os.MkdirTemp("", "rz-bench-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	for _, n := range ns {
		var kept []time.Duration
		ryukNever := 0
		var ryuk []time.Duration
		for i := range runs {
			d, err := b.freezeKeeperOnce(ctx, cache, n, wait)
			if err != nil {
				return fmt.Errorf("freeze n=%d run %d, keeper: %w", n, i, err)
			}
			kept = append(kept, d)
			d, removed, err := b.freezeRyukOnce(ctx, cache, n, prefix, wait)
			if err != nil {
				return fmt.Errorf("freeze n=%d run %d, %s: %w", n, i, what, err)
			}
			if removed {
				ryuk = append(ryuk, d)
			} else {
				ryukNever++
			}
			logf("freeze n=%d run %d: keeper %s, %s %s", n, i, ms(kept[len(kept)-1]), what, map[bool]string{true: ms(d), false: "nothing in " + wait.String()}[removed])
		}
		rs := "none"
		if len(ryuk) > 0 {
			rs = fmt.Sprintf("median=%s", ms(harness.Median(ryuk)))
		}
		fmt.Printf("freeze n=%d runs=%d: every process of the test's side SIGSTOPped | rightsize, engine-side keeper (default lease): freeze to the last destroy median=%s max=%s | testcontainers-go + %s: removed in %d runs (%s), nothing removed within %s in %d runs\n",
			n, runs, ms(harness.Median(kept)), ms(slices.Max(kept)), what, len(ryuk), rs, wait, ryukNever)
	}
	return nil
}

// freezeKeeperOnce: a rightsize owner with n containers and a keeper;
// owner and watchdog SIGSTOPped; the time to the last destroy.
func (b *bench) freezeKeeperOnce(ctx context.Context, cache string, n int, wait time.Duration) (time.Duration, error) {
	p := harness.Plan{Image: b.img, Cmd: b.cmd, Containers: n}
	env := harness.OwnerEnv(os.Environ(), cache, p, "RIGHTSIZE_WATCHDOG=engine")
	proc, err := proctest.Start(proctest.Spec{Name: "owner", Argv: []string{os.Args[0]}, Env: env})
	if err != nil {
		return 0, err
	}
	run, err := proc.Get("run", 3*time.Minute)
	if err != nil {
		proc.EnsureDead()
		return 0, ownerErr(proc, err)
	}
	wdPID := 0
	defer func() {
		// Continued and killed whatever happened; what is left is removed
		// by its run's label.
		for _, pid := range []int{wdPID, proc.Pid()} {
			if pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGCONT)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		proc.EnsureDead()
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = b.eng.RemoveRun(cctx, run)
		_ = b.eng.Remove(cctx, "rz-keeper-"+run)
	}()
	if _, err := proc.Get("ready", 3*time.Minute); err != nil {
		return 0, ownerErr(proc, err)
	}
	if k, _ := proc.Value("watchdog.kind"); k != "native" {
		return 0, fmt.Errorf("the owner's watchdog is %q, want the native one holding a keeper's lease", k)
	}
	v, _ := proc.Value("watchdog")
	if wdPID, _ = strconv.Atoi(v); wdPID <= 0 {
		return 0, fmt.Errorf("the owner has no watchdog")
	}
	label := harness.LabelRunID + "=" + run
	w := b.watch(ctx, label)
	t0 := time.Now()
	for _, pid := range []int{wdPID, proc.Pid()} {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return 0, err
		}
	}
	_, last, err := w.wait(n, wait)
	if err != nil {
		return 0, fmt.Errorf("run %s: %w", run, err)
	}
	return last.Sub(t0), nil
}

// freezeRyukOnce: a testcontainers-go owner with n containers, Ryuk on;
// the owner SIGSTOPped; whether its containers went within wait, and
// when. Then it is killed, and Ryuk reaps as after any crash.
func (b *bench) freezeRyukOnce(ctx context.Context, cache string, n int, prefix string, wait time.Duration) (time.Duration, bool, error) {
	id := nonce()
	session := "rzbench" + nonce()
	p := harness.Plan{Image: b.img, Cmd: b.cmd, Containers: n, Then: thenTC}
	env := tcEnv(harness.OwnerEnv(os.Environ(), cache, p, "RZ_BENCH_ID="+id), session, prefix, b.eng.Host)
	proc, err := proctest.Start(proctest.Spec{Name: "testcontainers-go owner", Argv: []string{os.Args[0]}, Env: env})
	if err != nil {
		return 0, false, err
	}
	defer b.awaitReaper(session)
	defer func() {
		_ = syscall.Kill(proc.Pid(), syscall.SIGCONT)
		proc.EnsureDead()
	}()
	if _, err := proc.Get("ready", 3*time.Minute); err != nil {
		return 0, false, ownerErr(proc, err)
	}
	label := labelBench + "=" + id
	w := b.watch(ctx, label)
	t0 := time.Now()
	if err := syscall.Kill(proc.Pid(), syscall.SIGSTOP); err != nil {
		return 0, false, err
	}
	_, last, err := w.wait(n, wait)
	if err != nil {
		return 0, false, nil // nothing (or not all) destroyed within wait
	}
	return last.Sub(t0), true, nil
}
