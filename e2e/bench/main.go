//go:build linux

// Command bench measures rightsize-go's promise on the engine at hand and
// prints one line per figure:
//
//   - crash-to-clean: SIGKILL of an owner process with N running containers
//     to the last of them destroyed, for each kind of watchdog asked for
//     (-watchdog: the script, the native one), each run paired with the
//     floor: one `docker rm -f NAME...` of as many fresh running
//     containers, from just before the command starts to the last of them
//     destroyed. Both sides end at the same point, seen the same way: the
//     engine's destroy events for the run's label (the engine logs one
//     once the container is out of its list), subscribed before the kill,
//     then one list call that must find none. Medians (the mean of the two
//     middle values for an even count), p95 (nearest rank), the ratio of
//     the medians, the median of the paired ratios, and the 1-minute load
//     average over the runs;
//   - eof-to-removal, from the same runs: where the time between the kill
//     and the removal goes, from the kernel's process events (the netlink
//     process connector: the owner's exit, the script watchdog's exec of
//     the test binary, the floor's exec of docker, with the kernel's
//     timestamps and nothing added to the watchdog's path; it needs root),
//     the engine's kill events (the first removal call taken) and, in runs
//     of their own, a tracing proxy in front of the engine (each
//     watchdog's first request and first DELETE);
//   - the same crash-to-clean for testcontainers-go with its reaper: the
//     real Ryuk image when the engine has it, else a stand-in of the
//     bench's own that speaks Ryuk's protocol and keeps its timings
//     (./ryukstandin: not Ryuk), built FROM scratch on the spot;
//   - freeze: every process of the test's side SIGSTOPped, its
//     connections left open: rightsize with an engine-side keeper
//     (RIGHTSIZE_WATCHDOG=engine) against testcontainers-go with Ryuk (or
//     the stand-in), each side's freeze to its last destroy, or nothing
//     within -freeze-wait;
//   - image: an image a GuardAll test binary built through the proxy,
//     the binary SIGKILLed, to the image's delete event, for each kind
//     of watchdog, paired with the floor: `docker rmi -f ID` of the same
//     build made directly, from just before the command starts to the
//     same event (run from the module's root: it builds the e2e guard
//     fixture);
//   - sweep: reaper.Sweep over K dead runs whose one sandbox is already
//     gone (the engine answers "not found"), over K dead runs listing
//     none, and over an empty ledger.
//
// Usage:
//
//	go run ./e2e/bench [-runs 20] [-n 1,5,20] [-watchdog script,native] [-figures crash,ryuk,sweep] ...
//
// The owner it kills is itself, re-executed with a plan (the same owner
// the e2e matrix kills), in a cache dir of its own. It needs a Docker
// engine and a static /bin/busybox (`make engine`). Run it on a quiet
// machine: every figure is wall-clock time.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

var (
	runs       = flag.Int("runs", 20, "crash-to-clean: paired runs per container count")
	counts     = flag.String("n", "1,5,20", "container counts, comma-separated")
	watchdogs  = flag.String("watchdog", "script,native", "crash-to-clean: the kinds of watchdog to measure (RIGHTSIZE_WATCHDOG), comma-separated: script, native")
	figures    = flag.String("figures", "crash,sweep,ryuk", "figures to measure, comma-separated: crash (with eof-to-removal), sweep, ryuk, freeze, image")
	imageRuns  = flag.Int("image-runs", 20, "image: paired runs")
	freezeWait = flag.Duration("freeze-wait", 30*time.Second, "freeze: how long to wait for a frozen side's containers to go")
	freezeRuns = flag.Int("freeze-runs", 3, "freeze: runs per container count and side")
	ryukMode   = flag.String("ryuk", "auto", "the reaper of testcontainers-go's side: real (testcontainers/ryuk:0.14.0, which must be on the engine), standin (the bench's stand-in, not Ryuk), or auto (real when present, else the stand-in)")
	ryukRuns   = flag.Int("ryuk-runs", 5, "testcontainers-go + Ryuk: runs per container count (each takes Ryuk's 10 s wait)")
	ryukCounts = flag.String("ryuk-n", "", "testcontainers-go + Ryuk: container counts (default: -n)")
	sweepRuns  = flag.String("sweep-runs", "10,100,1000", "sweep: dead-run counts, comma-separated")
	sweepReps  = flag.Int("sweep-reps", 10, "sweep: repetitions per count")
	cmdFlag    = flag.String("cmd", "sleep 3600", "the containers' command, on every side (busybox sleep as PID 1, as real images)")
	verbose    = flag.Bool("v", false, "print every run to stderr")
	imageFlag  = flag.String("image", "", "image of the containers (default: the busybox test image, built on the engine when missing)")
	timeoutFor = flag.Duration("gone-timeout", 60*time.Second, "how long a run may take before it counts as failed")
)

func main() {
	// Re-executed as an owner: be TestOwner of a one-test test binary.
	if p, ok, err := harness.PlanFromEnv(); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		runOwner(p)
		return
	}
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./e2e/bench [flags]\n\n"+
			"Measures crash-to-clean (rightsize, with either watchdog, against the floor, a\n"+
			"direct `docker rm -f`; testcontainers-go with Ryuk, or with the bench's stand-in\n"+
			"for it), where the time from the kill to the removal goes, and the sweep, and\n"+
			"prints one line per figure. Needs a Docker engine (make engine); root for the\n"+
			"process events.\n\nflags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// runOwner runs the owner's plan as the only test of a test binary made on
// the spot, so that it gets a real *testing.T (cleanups, context).
func runOwner(p harness.Plan) {
	tests := []testing.InternalTest{{Name: "TestOwner", F: func(t *testing.T) {
		if p.Then == thenTC {
			tcOwner(t, p)
			return
		}
		harness.Owner(t, p)
	}}}
	os.Args = []string{os.Args[0], "-test.run=^TestOwner$", "-test.timeout=0"}
	testing.Main(regexp.MatchString, tests, nil, nil)
}

func run() error {
	ctx := context.Background()
	want := map[string]bool{}
	for _, f := range strings.Split(*figures, ",") {
		want[strings.TrimSpace(f)] = true
	}
	var kinds []string
	for _, k := range strings.Split(*watchdogs, ",") {
		switch k = strings.TrimSpace(k); k {
		case sideScript, sideNative:
			kinds = append(kinds, k)
		default:
			return fmt.Errorf("-watchdog: %q is not script or native", k)
		}
	}
	ns, err := ints(*counts)
	if err != nil {
		return fmt.Errorf("-n: %w", err)
	}
	rns := ns
	if *ryukCounts != "" {
		if rns, err = ints(*ryukCounts); err != nil {
			return fmt.Errorf("-ryuk-n: %w", err)
		}
	}
	eng, err := harness.NewEngine(ctx, "")
	if err != nil {
		return fmt.Errorf("no engine (make engine): %w", err)
	}
	defer eng.Close()
	img := *imageFlag
	if img == "" {
		if img, err = testimage.BusyboxRef(); err != nil {
			return err
		}
	}
	b := &bench{eng: eng, img: img, cmd: strings.Fields(*cmdFlag)}
	procNote := "process events: on"
	if b.proc, err = newProcWatch(); err != nil {
		procNote = "process events: off (" + err.Error() + "; the eof-to-removal steps are missing)"
	}
	fmt.Printf("# %s, %d CPUs, %s, engine %s, image %s, load %s, %s\n", runtime.Version(), runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339), eng.Host, img, loadavg(), procNote)
	var failed []string
	fail := func(figure string, err error) {
		fmt.Printf("%s: FAILED: %v\n", figure, err)
		failed = append(failed, figure)
	}
	if want["crash"] {
		if err := b.crash(ctx, ns, *runs, kinds); err != nil {
			fail("crash-to-clean", err)
		}
	}
	if want["sweep"] {
		ks, err := ints(*sweepRuns)
		if err == nil {
			err = b.sweep(ctx, ks, *sweepReps)
		}
		if err != nil {
			fail("sweep", err)
		}
	}
	if want["ryuk"] {
		if err := b.ryuk(ctx, rns, *ryukRuns, *ryukMode); err != nil {
			fail("crash-to-clean/testcontainers-ryuk", err)
		}
	}
	if want["image"] {
		if err := b.image(ctx, *imageRuns, kinds); err != nil {
			fail("image", err)
		}
	}
	if want["freeze"] {
		if err := b.freeze(ctx, rns, *freezeRuns, *ryukMode, *freezeWait); err != nil {
			fail("freeze", err)
		}
	}
	fmt.Printf("# done %s, load %s\n", time.Now().UTC().Format(time.RFC3339), loadavg())
	fmt.Println("# per-sandbox overhead against raw testcontainers-go: go test -run='^$' -bench=. ./sandboxtest (BenchmarkOverhead, BenchmarkFirstSandbox)")
	if len(failed) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func logf(format string, args ...any) {
	if *verbose {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}
