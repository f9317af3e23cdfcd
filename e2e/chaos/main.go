//go:build linux

// Command chaos runs many owners of sandboxes at once — real test
// binaries (./owner), each starting a random mix of sandboxes, networks,
// local processes, keep-alive sandboxes, commands and GuardAll creates —
// and ends each of them a random way (SIGKILL anywhere, -test.timeout, a
// panic, a clean end, the owner and its watchdog killed together, a
// freeze then a kill), while sweeps run beside them, and checks the
// reaper's invariants throughout and at the end:
//
//   - nothing of a live owner is ever removed;
//   - once the faults stop and one sweep has run, nothing of a dead owner
//     remains (sandboxes, networks, processes, keep-alive use locks,
//     ledger files);
//   - the ledger is always parseable, by this module and in the formats
//     the other members of the family read;
//   - each death that left something gets exactly one fate;
//   - no process of the library outlives its purpose.
//
// Usage:
//
//	go run ./e2e/chaos -backend memory|docker|podman|kubernetes -deaths N -seed S [-faults]
//
// A seed fixes every owner's plan and every sweeper's; a violation prints
// the seed and the events that led to it. The last line is always
// `deaths=N violations=V seed=S`, and the exit code is 1 on any
// violation. docs/chaos.md says more.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"
)

var (
	backendFlag  = flag.String("backend", "memory", "memory, docker, podman or kubernetes")
	deathsFlag   = flag.Int("deaths", 100, "how many owners to run to their deaths")
	seedFlag     = flag.Int64("seed", 0, "the seed of every plan (0: a random one, printed)")
	faultsFlag   = flag.Bool("faults", false, "put a fault proxy in front of the engine's socket (docker, podman) or make the API server briefly unreachable (kubernetes)")
	parallel     = flag.Int("parallel", 0, "owners alive at once (0: the backend's default)")
	keepFlag     = flag.Bool("keep", false, "keep the work folder (cache dir, journal, owner logs) after the run")
	verbose      = flag.Bool("v", false, "print each death as it ends")
	ownerBin     = flag.String("owner-bin", "", "a prebuilt owner test binary (default: built with go test -c)")
	cliBin       = flag.String("cli-bin", "", "a prebuilt rightsize command (default: built with go build)")
	strict       = flag.Bool("strict", false, "count the violations of known defects (known.go) too")
	restartEvery = flag.Int("restart-every", 250, "with -faults on docker: restart the engine (dockerd, by its pid file) after about this many deaths; 0: never")
)

func main() {
	flag.Parse()
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Int64N(1<<53) + 1
	}
	deaths, violations, err := run(seed)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
	}
	fmt.Printf("deaths=%d violations=%d seed=%d\n", deaths, violations, seed)
	if violations > 0 || err != nil {
		os.Exit(1)
	}
}

func run(seed int64) (int, int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h, err := newHarness(ctx, seed)
	if err != nil {
		return 0, 0, err
	}
	defer h.close()
	start := time.Now()
	err = h.run(ctx)
	h.report(time.Since(start))
	return h.deaths(), h.violationCount(), err
}
