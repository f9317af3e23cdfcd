package reaper_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/backend/memory"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// The bound on a sweep of a very large ledger: 200,000 dead runs that list
// nothing swept in at most 10 s, the whole process peaking at 50 MB of
// resident memory or less, on a 2-core machine. Measured, not asserted (a
// loaded machine is slow, not wrong); figures in BENCHMARKS.md:
//
//	go test -run '^$' -bench BenchmarkSweepManyDead -benchtime 1x ./internal/reaper
//
// RIGHTSIZE_BENCH_RUNS sets another count.
//
// Method, for each repetition:
//
//  1. Untimed: write the runs into a fresh cache dir, one record each, as
//     rightsize-go writes it (boot id, pid namespace, start ticks, the
//     engine's endpoint), for a pid no process can have (above
//     /proc/sys/kernel/pid_max, a different one for each run), with the
//     start of a process of this boot that exited. No line file: the state
//     a test process leaves after its last sandbox was removed and it was
//     killed before it pruned its record, or one whose list is empty. Run
//     ids are scattered as random ones are, so the order of their names is
//     not the order in which they were written (on disk, the order of their
//     inodes). Then sync(2): a ledger that piled up over days is on the
//     disk, not waiting in the page cache to be written.
//  2. Run this test binary again as a fresh child process
//     (TestSweepManyHelper), which opens the backend and calls reaper.Sweep
//     once. A dead run that lists nothing is deleted without asking the
//     engine anything, so the engine's speed is not measured: the real
//     Docker driver by default, so that the process is the one `rightsize
//     sweep` and a test process run; RIGHTSIZE_BACKEND=memory measures the
//     same sweep with no engine (a folder of the benchmark's own).
//  3. Report the time spent inside Sweep (measured by the child), the
//     child's wall time from its start to its exit, and its peak resident
//     memory: getrusage's ru_maxrss of the child once it has been waited
//     for (the child also reports VmHWM from /proc/self/status, which
//     should agree).
//  4. Check that every run was reaped and the runs folder is empty.
//
// To list such a ledger with `rightsize ls`, write one without sweeping:
//
//	RZ_REAPER_TEST_ROLE=write-runs RIGHTSIZE_CACHE_DIR=/tmp/rz200k \
//	  go test -count=1 -run '^TestSweepManyHelper$' ./internal/reaper
func BenchmarkSweepManyDead(b *testing.B) {
	n := manyRuns(b)
	drv, env := openMany(b)
	rec := recordOf(deadProcess(b), drv.Name(), drv.Endpoint())
	var sweep, wall time.Duration
	var peakKiB, hwmKiB int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		cache := b.TempDir()
		writeManyDeadRuns(b, cache, rec, n)
		b.StartTimer()
		t0 := time.Now()
		h := startManyHelper(b, "sweep-many", cache, env...)
		took := h.Expect("sweep")
		reaped, _ := strconv.Atoi(h.Expect("reaped"))
		hwm, _ := strconv.ParseInt(h.Expect("hwm"), 10, 64)
		h.Finish()
		wall += time.Since(t0)
		b.StopTimer()
		d, err := time.ParseDuration(took)
		if err != nil {
			b.Fatalf("the child said sweep=%q", took)
		}
		sweep += d
		ru, ok := h.Cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			b.Fatal("no rusage for the child")
		}
		peakKiB = max(peakKiB, ru.Maxrss) // KiB on Linux
		hwmKiB = max(hwmKiB, hwm)
		if reaped != n {
			b.Fatalf("%d of %d runs reaped\n%s", reaped, n, h.Output())
		}
		if left := listDir(b, filepath.Join(cache, ledger.RunsDir)); len(left) != 0 {
			b.Fatalf("%d files left in the runs folder, first %s", len(left), left[0])
		}
		b.Logf("%d dead runs: Sweep %s, child %s (user %s, system %s), peak RSS %.1f MB (VmHWM %.1f MB)",
			n, d.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond),
			time.Duration(ru.Utime.Nano()).Round(time.Millisecond), time.Duration(ru.Stime.Nano()).Round(time.Millisecond),
			float64(ru.Maxrss)/1024, float64(hwm)/1024)
		b.StartTimer()
	}
	b.ReportMetric(sweep.Seconds()/float64(b.N), "sweep-s/op")
	b.ReportMetric(wall.Seconds()/float64(b.N), "child-s/op")
	b.ReportMetric(float64(peakKiB)/1024, "peak-MB")
	b.ReportMetric(float64(hwmKiB)/1024, "hwm-MB")
}

// TestSweepManyHelper is the child of BenchmarkSweepManyDead ("sweep-many":
// sweep the cache dir it is given and say how it went), or writes such a
// ledger for a person to measure something else on ("write-runs").
func TestSweepManyHelper(t *testing.T) {
	switch role() {
	case "sweep-many":
		sweepManyChild()
	case "write-runs":
		cache, err := ledger.Dir()
		if err != nil {
			t.Fatal(err)
		}
		drv, _ := openMany(t)
		n := manyRuns(t)
		writeManyDeadRuns(t, cache, recordOf(deadProcess(t), drv.Name(), drv.Endpoint()), n)
		t.Logf("wrote %d dead runs into %s", n, filepath.Join(cache, ledger.RunsDir))
	default:
		t.Skip("helper process of BenchmarkSweepManyDead")
	}
}

func sweepManyChild() {
	ctx := context.Background()
	cache, err := ledger.Dir()
	if err != nil {
		helperFail("cache dir: %v", err)
	}
	var drv backend.Driver
	if backend.Requested() == backend.Memory {
		drv, err = memory.Open("") // the benchmark's folder (memory.EnvDir)
	} else {
		drv, err = docker.Open(ctx)
	}
	if err != nil {
		helperFail("%s: %v", backend.Requested(), err)
	}
	defer drv.Close()
	t0 := time.Now()
	rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
	took := time.Since(t0)
	if err != nil {
		helperFail("sweep: %v", err)
	}
	proctest.Say("sweep", took.String())
	proctest.Say("reaped", strconv.Itoa(rep.Count(reaper.Reaped)))
	proctest.Say("hwm", strconv.FormatInt(vmHWM(), 10))
}

// vmHWM is this process's peak resident memory in KiB, from
// /proc/self/status; -1 when it cannot be read.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// openMany opens the backend the benchmark sweeps through: the memory
// backend on a folder of its own when RIGHTSIZE_BACKEND=memory (env is
// what tells a child so), else the real Docker driver.
func openMany(tb testing.TB) (drv backend.Driver, env []string) {
	tb.Helper()
	if backend.Requested() != backend.Memory {
		return openDocker(tb), nil
	}
	dir := tb.TempDir()
	d, err := memory.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Setenv(memory.EnvDir, dir) // for a writer that is this process
	return d, []string{backend.EnvBackend + "=" + backend.Memory, memory.EnvDir + "=" + dir}
}

func startManyHelper(b *testing.B, role, cache string, env ...string) *proctest.Helper {
	b.Helper()
	h := proctest.StartHelper(b, proctest.Spec{
		Name: "helper " + role,
		Argv: proctest.TestArgv("TestSweepManyHelper", "-test.timeout=10m"),
		Env: proctest.Environ(
			func(k string) bool { return strings.HasPrefix(k, "RIGHTSIZE_") || strings.HasPrefix(k, "RZ_") },
			append([]string{envRole + "=" + role, ledger.EnvCacheDir + "=" + cache}, env...)...),
		Dir: b.TempDir(),
	})
	h.Within = 10 * time.Minute
	return h
}

// manyRuns is how many runs the benchmark writes: 200,000 unless
// RIGHTSIZE_BENCH_RUNS says otherwise.
func manyRuns(tb testing.TB) int {
	s := os.Getenv("RIGHTSIZE_BENCH_RUNS")
	if s == "" {
		return 200_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		tb.Fatalf("RIGHTSIZE_BENCH_RUNS=%q: want a count", s)
	}
	return n
}

// writeManyDeadRuns writes n records like rec into cache's runs folder,
// each for its own pid above pid_max, under scattered run ids.
func writeManyDeadRuns(tb testing.TB, cache string, rec ledger.Record, n int) {
	tb.Helper()
	runs := runsDir(tb, cache)
	pidMax := 1 << 22 // the largest pid_max Linux allows
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pidMax = v
		}
	}
	for i := range n {
		rec.PID = pidMax + 1 + i
		p := ledger.RecordPath(runs, fmt.Sprintf("%08x", scatter(uint32(i))))
		if err := os.WriteFile(p, rec.Marshal(), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	syscall.Sync()
}

// scatter maps 0, 1, 2… to distinct ids spread over the whole 32-bit range
// (a bijection: odd multipliers and xor-shifts can be undone), as random
// run ids are.
func scatter(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x7feb352d
	x ^= x >> 15
	x *= 0x846ca68b
	x ^= x >> 16
	return x
}
