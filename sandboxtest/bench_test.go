package sandboxtest_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The benchmarks report medians with b.ReportMetric (ns/op, the time of a
// whole iteration of both sides, is suppressed); their figures and commands
// are in BENCHMARKS.md. They assert nothing about time.
//
// Both sides run the same workload: /server on 8080, published, ready once
// it printed "ready" (a log wait polled every 5 ms, so that neither side
// depends on which host testcontainers-go guesses for the port). /server
// exits on SIGTERM: with busybox sleep as PID 1, which ignores it,
// Terminate would wait Docker's 10 s where Stop waits 2 s, and the figure
// would say nothing about overhead.

func benchWait() wait.Strategy {
	return wait.ForLog("ready").WithPollInterval(5 * time.Millisecond).WithStartupTimeout(30 * time.Second)
}

// rawRun is testcontainers.Run, ready, then Terminate.
func rawRun(ctx context.Context, img string) (started, total time.Duration, err error) {
	start := time.Now()
	ctr, err := testcontainers.Run(ctx, img,
		testcontainers.WithCmd(testimage.ServerPath, "8080"),
		testcontainers.WithExposedPorts(serverPort),
		testcontainers.WithWaitStrategy(benchWait()),
	)
	started = time.Since(start)
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(ctx)
		}
		return 0, 0, err
	}
	if err := ctr.Terminate(ctx); err != nil {
		return 0, 0, err
	}
	return started, time.Since(start), nil
}

// oursRun is sandboxtest.Start, ready, then Stop.
func oursRun(tb testing.TB, img string) (started, total time.Duration) {
	tb.Helper()
	start := time.Now()
	g := sandboxtest.Start(tb, sandboxtest.Spec{
		Image:      img,
		Cmd:        []string{testimage.ServerPath, "8080"},
		Ports:      []string{serverPort},
		WaitingFor: benchWait(),
	})
	started = time.Since(start)
	if err := g.Stop(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return started, time.Since(start)
}

// BenchmarkOverhead: a sandbox's whole life (start, ready, stop) against
// testcontainers.Run + Terminate, interleaved, alternating which goes
// first.
func BenchmarkOverhead(b *testing.B) {
	quiet(b)
	img := testimage.Busybox(b)
	ctx := context.Background()
	// First use of each path (the session, testcontainers-go's own set-up)
	// is BenchmarkFirstSandbox's.
	if _, _, err := rawRun(ctx, img); err != nil {
		b.Fatal(err)
	}
	oursRun(b, img)

	var raw, ours, diff, startDiff, stopDiff []time.Duration
	for i := 0; i < b.N; i++ {
		var rStart, rTotal, oStart, oTotal time.Duration
		var err error
		if i%2 == 0 {
			rStart, rTotal, err = rawRun(ctx, img)
			oStart, oTotal = oursRun(b, img)
		} else {
			oStart, oTotal = oursRun(b, img)
			rStart, rTotal, err = rawRun(ctx, img)
		}
		if err != nil {
			b.Fatal(err)
		}
		raw, ours, diff = append(raw, rTotal), append(ours, oTotal), append(diff, oTotal-rTotal)
		startDiff = append(startDiff, oStart-rStart)
		stopDiff = append(stopDiff, (oTotal-oStart)-(rTotal-rStart))
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(medianOf(raw)), "raw-ms")
	b.ReportMetric(ms(medianOf(ours)), "ours-ms")
	b.ReportMetric(ms(medianOf(ours)-medianOf(raw)), "overhead-ms")
	b.ReportMetric(ms(medianOf(diff)), "paired-overhead-ms")
	b.ReportMetric(ms(medianOf(startDiff)), "start-overhead-ms")
	b.ReportMetric(ms(medianOf(stopDiff)), "stop-overhead-ms")
}

// quiet silences testcontainers-go's log for the benchmark, so that the
// results are not lost among its lines.
func quiet(b *testing.B) {
	prev := tclog.Default()
	tclog.SetDefault(tclog.NewNoopLogger())
	b.Cleanup(func() { tclog.SetDefault(prev) })
}

// BenchmarkFirstSandbox: the first sandbox of a fresh process (backend
// resolution, sweep, record, watchdog, then the sandbox) against the first
// testcontainers.Run of a fresh process; each iteration re-executes this
// binary once for each side, alternating which goes first, and times the
// call inside the process (not the process start). Each ours process gets
// an empty cache dir.
func BenchmarkFirstSandbox(b *testing.B) {
	quiet(b)
	img := testimage.Busybox(b)
	var raw, ours []time.Duration
	for i := 0; i < b.N; i++ {
		sides := []string{"raw", "ours"}
		if i%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			h := startHelper(b, "bench-first", b.TempDir(), "RZ_TEST_BENCH_SIDE="+side, "RZ_TEST_IMAGE="+img)
			d, err := time.ParseDuration(h.Expect("took"))
			if err != nil {
				b.Fatal(err)
			}
			h.Finish()
			if side == "raw" {
				raw = append(raw, d)
			} else {
				ours = append(ours, d)
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(medianOf(raw)), "raw-first-ms")
	b.ReportMetric(ms(medianOf(ours)), "ours-first-ms")
	b.ReportMetric(ms(medianOf(ours)-medianOf(raw)), "first-overhead-ms")
}

// helperBenchFirst times the first start of its process (to ready), then
// stops what it started.
func helperBenchFirst(t *testing.T) {
	img := os.Getenv("RZ_TEST_IMAGE")
	var took time.Duration
	switch side := os.Getenv("RZ_TEST_BENCH_SIDE"); side {
	case "raw":
		var err error
		if took, _, err = rawRun(context.Background(), img); err != nil {
			t.Fatal(err)
		}
	case "ours":
		took, _ = oursRun(t, img)
	default:
		t.Fatalf("RZ_TEST_BENCH_SIDE=%q", side)
	}
	proctest.Say("took", took.String())
	proctest.Block()
}

// BenchmarkSuite is what a user's suite sees: a fresh process (this binary
// re-executed, an empty cache dir) starts 5 sandboxes one after another,
// each with testcontainers-go's default log wait (polled every 100 ms, as
// a user writes it), and its cleanups remove them; the whole is timed
// inside the process, first-time costs included (backend, sweep, record,
// watchdog). Three sides, alternating their order: plain testcontainers-go
// (Run, CleanupContainer), Track(t) on the same calls, and Start.
func BenchmarkSuite(b *testing.B) {
	quiet(b)
	img := testimage.Busybox(b)
	took := map[string][]time.Duration{}
	sides := []string{"plain", "track", "start"}
	for i := 0; i < b.N; i++ {
		order := slices.Clone(sides)
		for range i % len(order) {
			order = append(order[1:], order[0])
		}
		for _, side := range order {
			h := startHelper(b, "bench-suite", b.TempDir(), "RZ_TEST_BENCH_SIDE="+side, "RZ_TEST_IMAGE="+img)
			d, err := time.ParseDuration(h.Expect("took"))
			if err != nil {
				b.Fatal(err)
			}
			h.Finish()
			took[side] = append(took[side], d)
		}
	}
	b.ReportMetric(0, "ns/op")
	for _, side := range sides {
		b.ReportMetric(ms(medianOf(took[side])), side+"-ms")
	}
	b.ReportMetric(ms(medianOf(took["start"])-medianOf(took["plain"])), "start-overhead-ms")
	b.ReportMetric(ms(medianOf(took["track"])-medianOf(took["plain"])), "track-overhead-ms")
}

// helperBenchSuite starts 5 sandboxes in a subtest, whose cleanups remove
// them, and says how long the whole took.
func helperBenchSuite(t *testing.T) {
	img, side := os.Getenv("RZ_TEST_IMAGE"), os.Getenv("RZ_TEST_BENCH_SIDE")
	ctx := context.Background()
	opts := func(t *testing.T) []testcontainers.ContainerCustomizer {
		o := []testcontainers.ContainerCustomizer{
			testcontainers.WithCmd(testimage.ServerPath, "8080"),
			testcontainers.WithExposedPorts(serverPort),
			testcontainers.WithWaitStrategy(wait.ForLog("ready")),
		}
		if side == "track" {
			o = append(o, sandboxtest.Track(t))
		}
		return o
	}
	start := time.Now()
	t.Run("suite", func(t *testing.T) {
		for range 5 {
			switch side {
			case "plain", "track":
				c, err := testcontainers.Run(ctx, img, opts(t)...)
				testcontainers.CleanupContainer(t, c)
				if err != nil {
					t.Fatal(err)
				}
			case "start":
				sandboxtest.Start(t, sandboxtest.Spec{
					Image:      img,
					Cmd:        []string{testimage.ServerPath, "8080"},
					Ports:      []string{serverPort},
					WaitingFor: wait.ForLog("ready"),
				})
			default:
				t.Fatalf("RZ_TEST_BENCH_SIDE=%q", side)
			}
		}
	})
	proctest.Say("took", time.Since(start).String())
	proctest.Block()
}

// BenchmarkStopIgnoringTerm: Stop of busybox sleep as PID 1, which ignores
// SIGTERM: the grace, then a forced removal.
func BenchmarkStopIgnoringTerm(b *testing.B) {
	quiet(b)
	img := testimage.Busybox(b)
	var stops []time.Duration
	for i := 0; i < b.N; i++ {
		g := sandboxtest.Start(b, sandboxtest.Spec{Image: img})
		start := time.Now()
		if err := g.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
		stops = append(stops, time.Since(start))
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(medianOf(stops)), "stop-ms")
	b.ReportMetric(ms(medianOf(stops)-backend.DefaultStopGrace), "over-grace-ms")
	b.ReportMetric(ms(slices.Max(stops)), "max-stop-ms")
}

func medianOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		panic("median of nothing")
	}
	s := slices.Sorted(slices.Values(ds))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
