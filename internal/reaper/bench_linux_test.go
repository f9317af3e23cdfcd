package reaper_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/keeper"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// The reaper's speed targets, measured (not asserted: a loaded machine is
// slow, not wrong). Figures and commands are in BENCHMARKS.md:
//
//	go test -run '^$' -bench . -benchtime 20x ./reaper/
//
// The footprint of a waiting watchdog is not a time; it is asserted, by
// TestWaitingWatchdogFootprint.

// BenchmarkStartWatchdog: spawning a watchdog whose script is already
// written (target ≤ 5 ms). Each one is released and waited for outside the
// timed part.
func BenchmarkStartWatchdog(b *testing.B) {
	b.Setenv(reaper.EnvDebug, "")
	e := newMemEngine(b)
	plan := e.plan(b)
	cache := b.TempDir()
	runs := runsDir(b, cache)
	wd, err := reaper.StartWatchdog(cache, runs, "00000000", plan) // writes the script
	must(b, err)
	endWatchdog(b, wd)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wd, err := reaper.StartWatchdog(cache, runs, fmt.Sprintf("%08x", i+1), plan)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		endWatchdog(b, wd)
		b.StartTimer()
	}
}

// BenchmarkSweep: a sweep of 1,000 records whose owner is dead, with no
// names (target ≤ 200 ms), and of 1,000 records of this very process
// (target ≤ 50 ms), against the real Docker backend (which no empty list
// calls).
func BenchmarkSweep(b *testing.B) {
	drv := openDocker(b)
	me, dead := self(b), deadProcess(b)
	const n = 1000
	write := func(b *testing.B, runs string, id ledger.Identity) {
		rec := recordOf(id, backend.Docker, drv.Endpoint()).Marshal()
		for i := range n {
			rp, _, _ := ledger.Paths(runs, fmt.Sprintf("%08x", i))
			if err := os.WriteFile(rp, rec, 0o600); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("dead-empty-1000", func(b *testing.B) {
		cache := b.TempDir()
		runs := runsDir(b, cache)
		var cpu time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			write(b, runs, dead)
			b.StartTimer()
			c0 := cpuTime()
			rep, err := reaper.Sweep(context.Background(), drv, reaper.WithCacheDir(cache))
			cpu += cpuTime() - c0
			if err != nil || rep.Count(reaper.Reaped) != n {
				b.Fatalf("%d of %d reaped, err %v", rep.Count(reaper.Reaped), n, err)
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("live-1000", func(b *testing.B) {
		cache := b.TempDir()
		write(b, runsDir(b, cache), me)
		b.ResetTimer()
		c0 := cpuTime()
		for i := 0; i < b.N; i++ {
			rep, err := reaper.Sweep(context.Background(), drv, reaper.WithCacheDir(cache))
			if err != nil || rep.Count(reaper.LeftAlone) != n {
				b.Fatalf("%d of %d left alone, err %v", rep.Count(reaper.LeftAlone), n, err)
			}
		}
		reportCPU(b, cpuTime()-c0)
	})
}

// cpuTime is the CPU time this process has used, user and system: on a
// machine shared with other work it says what a sweep costs where the
// wall-clock time also says how long it waited for the CPU and the disk.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkSweepNotFound: dead runs listing one sandbox each that no
// longer exists, so the engine is asked, and answers "not found", once per
// run. The crash-matrix harness (e2e/bench) measures the same shape.
func BenchmarkSweepNotFound(b *testing.B) {
	drv := openDocker(b)
	rec := recordOf(deadProcess(b), backend.Docker, drv.Endpoint()).Marshal()
	for _, n := range []int{10, 100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			cache := b.TempDir()
			runs := runsDir(b, cache)
			prefix := uniqueName(b, "gone")
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := range n {
					id := fmt.Sprintf("%08x", j)
					writeRun(b, runs, id, rec, []string{prefix + "-" + id}, nil)
				}
				b.StartTimer()
				rep, err := reaper.Sweep(context.Background(), drv, reaper.WithCacheDir(cache))
				if err != nil || rep.Count(reaper.Reaped) != n {
					b.Fatalf("%d of %d reaped, err %v", rep.Count(reaper.Reaped), n, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/run")
		})
	}
}

// TestWaitingWatchdogFootprint: a watchdog waiting for its owner holds
// little memory (VmRSS ≤ 2 MiB under dash or busybox ash; bash is larger
// and only logged) and uses no CPU at all (utime+stime unchanged over 1 s).
func TestWaitingWatchdogFootprint(t *testing.T) {
	t.Setenv(reaper.EnvDebug, "")
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	e := newMemEngine(t)
	cache := t.TempDir()
	wd, err := reaper.StartWatchdog(cache, runsDir(t, cache), "0000ccc1", e.plan(t))
	must(t, err)
	t.Cleanup(func() { endWatchdog(t, wd) })
	proctest.WaitUntil(t, 10*time.Second, "the watchdog to block reading its stdin", func() bool { w, _ := proctest.WaitingOnStdin(wd.PID); return w })

	rss, err := proctest.VmRSSKiB(wd.PID)
	must(t, err)
	cpu0 := cpuTicks(t, wd.PID)
	time.Sleep(time.Second) // the measurement window, not a synchronisation
	cpu1 := cpuTicks(t, wd.PID)
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	t.Logf("waiting watchdog (/bin/sh = %s): VmRSS %d KiB, CPU %d ticks over 1 s", sh, rss, cpu1-cpu0)
	if cpu1 != cpu0 {
		t.Errorf("a waiting watchdog used %d clock ticks of CPU in 1 s, want none", cpu1-cpu0)
	}
	if base := filepath.Base(sh); (base == "dash" || base == "busybox") && rss > 2048 {
		t.Errorf("a waiting watchdog has VmRSS %d KiB, want ≤ 2048 KiB", rss)
	}
}

// cpuTicks is proctest.CPUTicks, failing the test when it cannot be read.
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	n, err := proctest.CPUTicks(pid)
	must(t, err)
	return n
}

// BenchmarkFirstAdmit: a session's first Admit on the real engine, which
// starts its watchdog: the native one alone, and the native one holding
// the lease of an engine-side keeper (the keeper image already on the
// engine: the first iteration builds it when missing, outside the timing).
// The difference is the keeper's cost to a process's first sandbox. Each
// watchdog, and its keeper, is ended outside the timed part.
//
//	flock /tmp/rz-engine.lock go test -run '^$' -bench BenchmarkFirstAdmit -benchtime 10x ./reaper/
func BenchmarkFirstAdmit(b *testing.B) {
	drv := openDocker(b)
	for _, kind := range []string{reaper.NativeWatchdog, reaper.EngineWatchdog} {
		b.Run(kind, func(b *testing.B) {
			b.Setenv(reaper.EnvWatchdog, kind)
			b.Setenv(reaper.EnvDebug, "")
			b.Setenv("RIGHTSIZE_WATCHDOG_SETTLE", "0")
			first := true
			for b.Loop() {
				b.StopTimer()
				s, err := reaper.Open(context.Background(), drv, reaper.WithCacheDir(b.TempDir()))
				must(b, err)
				if first && kind == reaper.EngineWatchdog {
					// The image, once; then the timed runs find it.
					_, err := keeper.Ensure(context.Background(), drv.Client())
					must(b, err)
				}
				first = false
				b.StartTimer()
				note, err := s.Admit(backend.SandboxKind, s.NextName())
				b.StopTimer()
				must(b, err)
				if note == nil || !note.Started {
					b.Fatalf("no watchdog: %+v", note)
				}
				if kind == reaper.EngineWatchdog && note.Keeper == "" {
					b.Fatalf("no keeper: %v", note.KeeperErr)
				}
				endWatchdog(b, s.Watchdog())
				b.StartTimer()
			}
		})
	}
}
