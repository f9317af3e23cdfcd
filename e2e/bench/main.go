//go:build linux

// Command bench measures rightsize-go's promise on the engine at hand and
// prints one line per figure:
//
//   - crash-to-clean: SIGKILL of an owner process with N running containers
//     to the last of them destroyed (engine events, subscribed before the
//     kill), median and p95 over -runs runs, each paired in the same run
//     with the floor: one `docker rm -f` CLI call naming as many fresh
//     running containers, timed from its start to its end;
//   - the same for testcontainers-go with Ryuk, when -ryuk-image is on the
//     engine (it cannot be pulled where no registry answers: skipped, with
//     a message);
//   - sweep: reaper.Sweep over K dead runs whose one sandbox is already
//     gone (the engine answers "not found"), over K dead runs listing
//     none, and over an empty ledger.
//
// Usage:
//
//	go run ./e2e/bench [-runs 20] [-n 1,5,20] [-figures crash,ryuk,sweep] ...
//
// The owner it kills is itself, re-executed with a plan (the same owner
// the e2e matrix kills), in a cache dir of its own. It needs a Docker
// engine and a static /bin/busybox (`make engine`). Run it on a quiet
// machine: every figure is wall-clock time.
package main

import (
	"context"
	"errors"
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
	counts     = flag.String("n", "1,5,20", "crash-to-clean: container counts, comma-separated")
	figures    = flag.String("figures", "crash,ryuk,sweep", "figures to measure, comma-separated: crash, ryuk, sweep")
	ryukImage  = flag.String("ryuk-image", "testcontainers/ryuk:0.14.0", "the Ryuk image testcontainers-go runs; the Ryuk figure is skipped when the engine does not have it")
	sweepRuns  = flag.String("sweep-runs", "10,100,1000", "sweep: dead-run counts, comma-separated")
	sweepReps  = flag.Int("sweep-reps", 10, "sweep: repetitions per count")
	breakdown  = flag.Bool("breakdown", false, "crash-to-clean: also say where rightsize's time goes (a wrapper on the watchdog's docker command timestamps its start)")
	cmdFlag    = flag.String("cmd", "sleep 3600", "the containers' command, on both sides (busybox sleep as PID 1, as real images)")
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
			"Measures crash-to-clean (rightsize against the floor, a direct `docker rm -f`;\n"+
			"testcontainers-go with Ryuk when its image is present) and the sweep, and prints\n"+
			"one line per figure. Needs a Docker engine (make engine).\n\nflags:\n")
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
	eng, err := harness.NewEngine(ctx, "")
	if err != nil {
		return fmt.Errorf("no engine (make engine): %w", err)
	}
	defer eng.Close()
	img := *imageFlag
	if img == "" {
		if img, err = busyboxImage(); err != nil {
			return err
		}
	}
	fmt.Printf("# %s, %d CPUs, %s, engine %s, image %s\n", runtime.Version(), runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339), eng.Host, img)
	b := &bench{eng: eng, img: img, cmd: strings.Fields(*cmdFlag)}
	if want["crash"] {
		ns, err := ints(*counts)
		if err != nil {
			return fmt.Errorf("-n: %w", err)
		}
		if err := b.crash(ctx, ns, *runs); err != nil {
			return err
		}
	}
	if want["ryuk"] {
		ns, _ := ints(*counts)
		if err := b.ryuk(ctx, ns, *runs); err != nil {
			return err
		}
	}
	if want["sweep"] {
		ks, err := ints(*sweepRuns)
		if err != nil {
			return fmt.Errorf("-sweep-runs: %w", err)
		}
		if err := b.sweep(ctx, ks, *sweepReps); err != nil {
			return err
		}
	}
	fmt.Println("# per-sandbox overhead against raw testcontainers-go: go test -run='^$' -bench=. ./sandboxtest (BenchmarkOverhead, BenchmarkFirstSandbox)")
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

// imageTB is the smallest testing.TB testimage.Busybox can be called
// with outside a test: it records a failure and ends the goroutine.
type imageTB struct {
	testing.TB
	err error
}

func (t *imageTB) Helper()             {}
func (t *imageTB) Fatal(args ...any)   { t.err = errors.New(fmt.Sprint(args...)); runtime.Goexit() }
func (t *imageTB) Skip(args ...any)    { t.err = errors.New(fmt.Sprint(args...)); runtime.Goexit() }
func (t *imageTB) Logf(string, ...any) {}

// busyboxImage is the e2e matrix's image, built on the engine if missing.
func busyboxImage() (string, error) {
	tb := &imageTB{}
	ref := ""
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				tb.err = fmt.Errorf("testimage: %v", r)
			}
		}()
		ref = testimage.Busybox(tb)
	}()
	<-done
	if tb.err != nil {
		return "", tb.err
	}
	return ref, nil
}

func logf(format string, args ...any) {
	if *verbose {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}
