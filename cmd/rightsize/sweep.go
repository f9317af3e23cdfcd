package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

func (c *cli) sweep(args []string) error {
	start := time.Now()
	fs := newFlags("sweep")
	dryRun := fs.Bool("dry-run", false, "")
	backendFlag := fs.String("backend", "", "")
	cacheFlag := fs.String("cache", "", "")
	verbose := fs.Bool("v", false, "")
	runFlag := fs.String("run", "", "")
	timeout := fs.Duration("timeout", 0, "")
	if stop, err := c.parse("sweep", fs, args, 0); stop {
		return err
	}
	byHand := false
	fs.Visit(func(f *flag.Flag) { byHand = byHand || f.Name == "run" })
	if byHand && !ledger.ValidRunID(*runFlag) {
		return &usageError{cmd: "sweep", msg: fmt.Sprintf("--run %s: not a run id (the name of a run's files in the runs folder, without .json)", termtext.Quote(*runFlag))}
	}
	if *timeout < 0 {
		return &usageError{cmd: "sweep", msg: fmt.Sprintf("--timeout %s: want a positive duration, such as 30s or 2m", *timeout)}
	}
	if *backendFlag != "" {
		name := backend.Canonical(strings.ToLower(strings.TrimSpace(*backendFlag)))
		if name != backend.Docker && name != backend.Msb && name != backend.Kubernetes {
			return &usageError{cmd: "sweep", msg: fmt.Sprintf("--backend %s: want docker, msb or kubernetes", termtext.Quote(*backendFlag))}
		}
		// Exactly what RIGHTSIZE_BACKEND would choose.
		os.Setenv(backend.EnvBackend, name)
	}
	cache, err := cacheDir(*cacheFlag)
	if err != nil {
		return err
	}
	what := "sweep"
	if byHand {
		what = "sweep --run " + *runFlag
		// What the run holds, before anything is touched, as ls -v shows it.
		rf, err := ledger.ReadRun(cache, *runFlag)
		if errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("%s: no such run in %s (rightsize ls lists the runs); nothing was swept", what, filepath.Join(cache, ledger.RunsDir))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		row := describeRun(rf, time.Now())
		c.lsTable(c.stdout, []lsRun{row})
		c.lsNames(c.stdout, []lsRun{row})
		fmt.Fprintln(c.stdout)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	resolveFor := backend.ResolveTimeout
	if *timeout > 0 {
		resolveFor = min(resolveFor, *timeout)
	}
	rctx, cancel := context.WithTimeout(ctx, resolveFor)
	drv, err := openEngine(rctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{code: exitInterrupted, msg: what + ": interrupted before an engine answered; nothing was swept"}
		}
		if *timeout > 0 && rctx.Err() != nil {
			return fmt.Errorf("%s: no engine answered within --timeout %s (%v); nothing was swept, every run stays in the ledger", what, *timeout, err)
		}
		// Nothing can be removed without an engine: whatever the ledger
		// lists stays there, which is "kept back".
		return fmt.Errorf("%s: %v; nothing was swept, every run stays in the ledger", what, err)
	}
	defer drv.Close()

	opts := []reaper.Option{reaper.WithCacheDir(cache), reaper.WithFateBy(reaper.ByCommand)}
	if byHand {
		opts = append(opts, reaper.OnlyRun(*runFlag))
	}
	if *timeout > 0 {
		// One budget for the whole command: what resolving the engine took
		// is spent. A budget already spent still sweeps nothing, and says so.
		opts = append(opts, reaper.WithBudget(max(*timeout-time.Since(start), time.Nanosecond)))
	}
	if *dryRun {
		opts = append(opts, reaper.DryRun())
	}
	if *verbose {
		opts = append(opts, reaper.WithLogger(slog.New(slog.NewTextHandler(safeWriter{c.stderr}, nil))))
	}
	rep, err := reaper.Sweep(ctx, drv, opts...)
	if rep != nil {
		rep.Endpoint = docker.SpokenEndpoint(rep.Endpoint)
		if _, werr := rep.WriteTo(safeWriter{c.stdout}); werr != nil && err == nil {
			err = werr
		}
	}
	if ctx.Err() != nil {
		return &exitError{code: exitInterrupted, msg: what + ": interrupted; what was not reaped stays in the ledger"}
	}
	if byHand && errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("%s: the run's files went while it was read (another process reaped it)", what)
	}
	if err != nil {
		return fmt.Errorf("%s of %s: %w", what, cache, err)
	}
	if rep.Unfinished != "" {
		why := rep.Unfinished
		if *timeout > 0 {
			why = fmt.Sprintf("--timeout %s ran out", *timeout)
		}
		return fmt.Errorf("%s: stopped before the end (%s); what it did not reach stays in the ledger for a later sweep", what, why)
	}
	if byHand {
		if rr, ok := rep.Run(*runFlag); ok && rr.Decision == reaper.LeftAlone {
			if rr.Liveness.State == ledger.Alive {
				return fmt.Errorf("%s: its owner is alive: %s; the run was left alone, nothing was removed", what, rr.Liveness.Reason)
			}
			return fmt.Errorf("%s: the run was left alone: %s; nothing was removed", what, rr.Reason)
		}
	}
	if !rep.Clean() {
		return fmt.Errorf("%s: %s could not be removed (the lines marked ! say why); %s in the ledger for a later sweep",
			what, keptSummary(rep), plural(keptCount(rep), "it stays", "they stay"))
	}
	return nil
}

func keptCount(rep *reaper.Report) int {
	n := 0
	for _, rr := range rep.Runs {
		for _, it := range rr.Kept {
			if it.Outcome != ledger.LeftForMember {
				n++
			}
		}
		if rr.Decision == reaper.Kept && len(rr.Kept) == 0 && len(rr.ForMember) == 0 {
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
			if it.Outcome == ledger.LeftForMember {
				continue
			}
			if it.Kind == backend.NetworkKind {
				n++
			} else {
				s++
			}
		}
		if rr.Decision == reaper.Kept && len(rr.Kept) == 0 && len(rr.ForMember) == 0 {
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
