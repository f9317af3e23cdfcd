package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/reaper"
)

// resolveTimeout bounds finding the engine: an unreachable TCP endpoint
// must not hang the command.
const resolveTimeout = 30 * time.Second

func (c *cli) sweep(args []string) error {
	fs := newFlags("sweep")
	dryRun := fs.Bool("dry-run", false, "")
	backendFlag := fs.String("backend", "", "")
	cacheFlag := fs.String("cache", "", "")
	verbose := fs.Bool("v", false, "")
	if stop, err := c.parse("sweep", fs, args, 0); stop {
		return err
	}
	if *backendFlag != "" {
		name := backend.Canonical(strings.ToLower(strings.TrimSpace(*backendFlag)))
		if name != backend.Docker && name != backend.Msb {
			return &usageError{cmd: "sweep", msg: fmt.Sprintf("--backend %s: want docker or msb", quoteIfNeeded(*backendFlag))}
		}
		// Exactly what RIGHTSIZE_BACKEND would choose.
		os.Setenv(backend.EnvBackend, name)
	}
	cache, err := cacheDir(*cacheFlag)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	drv, err := backend.Resolve(rctx)
	cancel()
	if err != nil {
		// Nothing can be removed without an engine: whatever the ledger
		// lists stays there, which is "kept back".
		return fmt.Errorf("sweep: %v; nothing was swept, every run stays in the ledger", err)
	}
	defer drv.Close()

	opts := []reaper.Option{reaper.WithCacheDir(cache)}
	if *dryRun {
		opts = append(opts, reaper.DryRun())
	}
	if *verbose {
		opts = append(opts, reaper.WithLogger(slog.New(slog.NewTextHandler(safeWriter{c.stderr}, nil))))
	}
	rep, err := reaper.Sweep(ctx, drv, opts...)
	if rep != nil {
		if _, werr := rep.WriteTo(safeWriter{c.stdout}); werr != nil && err == nil {
			err = werr
		}
	}
	if ctx.Err() != nil {
		return &exitError{code: exitInterrupted, msg: "sweep: interrupted; what was not reaped stays in the ledger"}
	}
	if err != nil {
		return fmt.Errorf("sweep of %s: %w", cache, err)
	}
	if !rep.Clean() {
		return fmt.Errorf("sweep: %s could not be removed (the lines marked ! say why); %s in the ledger for a later sweep",
			keptSummary(rep), plural(keptCount(rep), "it stays", "they stay"))
	}
	return nil
}

func keptCount(rep *reaper.Report) int {
	n := 0
	for _, rr := range rep.Runs {
		n += len(rr.Kept)
		if rr.Decision == reaper.Kept && len(rr.Kept) == 0 {
			n++ // a run kept for its files, not its names
		}
	}
	return n
}

// keptSummary says what was kept back: "2 sandboxes and 1 network".
func keptSummary(rep *reaper.Report) string {
	var s, n, other int
	for _, rr := range rep.Runs {
		for _, it := range rr.Kept {
			if it.Kind == "network" {
				n++
			} else {
				s++
			}
		}
		if rr.Decision == reaper.Kept && len(rr.Kept) == 0 {
			other++
		}
	}
	var parts []string
	if s > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", s, plural(s, "sandbox", "sandboxes")))
	}
	if n > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", n, plural(n, "network", "networks")))
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("the files of %d %s", other, plural(other, "run", "runs")))
	}
	return strings.Join(parts, " and ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
