package reaper

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/keeper"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
)

// EngineWatchdog is the RIGHTSIZE_WATCHDOG value that asks for an
// engine-side keeper beside the native watchdog, on any engine; with the
// variable unset, the keeper is used where the engine is another machine's.
const EngineWatchdog = "engine"

// envNativeKeeper gives a native watchdog the id of the run's keeper,
// whose lease it holds for as long as it lives.
const envNativeKeeper = "RIGHTSIZE_NATIVE_WATCHDOG_KEEPER"

// holdWait bounds the owner's wait for its watchdog to take the keeper's
// lease: the start of a process and one attach.
const holdWait = 30 * time.Second

// keeperEngine is a backend whose engine can run a run's keeper: package
// backend/docker's driver, on Docker or Podman.
type keeperEngine interface {
	Client() *client.Client
	Remote() bool
	MarkKept(runID string, lease time.Duration)
}

// wantKeeper returns the engine a keeper should run on for drv's runs:
// RIGHTSIZE_WATCHDOG=engine asks for one anywhere; unset, an engine that
// is another machine's gets one; script and native ask for none.
func wantKeeper(drv any) (keeperEngine, bool) {
	ke, ok := drv.(keeperEngine)
	if !ok {
		return nil, false
	}
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvWatchdog))) {
	case EngineWatchdog:
		return ke, true
	case "":
		return ke, ke.Remote()
	}
	return nil, false
}

// startKeeper starts run runID's keeper and a native watchdog that holds
// its lease, and returns once the lease is held; the driver then marks
// what the run creates as kept. When the engine refuses the keeper, or
// the watchdog cannot hold its lease, the keeper is removed and the error
// says why; the watchdog, when one started, serves without a keeper.
func (s *Session) startKeeper(ke keeperEngine, start func(keeperID string) (*Watchdog, error)) (*Watchdog, *keeper.Keeper, error) {
	if !nativeCapable.Load() {
		return nil, nil, errors.New("only the native watchdog can hold a keeper's lease, and this program cannot run it (it does not import package sandboxtest, nor call reaper.WatchdogMain first thing)")
	}
	ctx := context.Background()
	k, err := keeper.Start(ctx, ke.Client(), s.runID, keeper.Options{})
	if err != nil {
		return nil, nil, err
	}
	wd, err := start(k.ID)
	if err == nil {
		hctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-wd.exited:
				cancel()
			case <-hctx.Done():
			}
		}()
		err = k.WaitHeld(hctx, holdWait)
		cancel()
		if err != nil && wd.lost.Load() {
			err = fmt.Errorf("%w (the watchdog ended: %v)", err, wd.Err())
		}
	}
	if err != nil {
		if rerr := k.Remove(ctx); rerr != nil {
			err = fmt.Errorf("%w (and removing the keeper: %v)", err, rerr)
		}
		return wd, nil, err
	}
	ke.MarkKept(s.runID, k.LeaseTimeout)
	return wd, k, nil
}

// holdKeeper is the native watchdog's side: it takes the lease of the
// keeper ref on drv's engine, and keeps it until Close or its own end. A
// lease that cannot be taken, or ends while the owner lives, is logged:
// the watchdog still does its own work.
func holdKeeper(drv any, ref string, logger *log.Logger) *keeper.Lease {
	ke, ok := drv.(keeperEngine)
	if !ok {
		logger.Printf("keeper %s: this backend cannot hold its lease", ref)
		return nil
	}
	l, err := keeper.Hold(context.Background(), ke.Client(), ref)
	if err != nil {
		logger.Printf("keeper %s: %v", ref, err)
		return nil
	}
	logger.Printf("holding the lease of keeper %s (timeout %s)", l.Keeper, l.Timeout)
	go func() {
		<-l.Done()
		if err := l.Err(); !errors.Is(err, keeper.ErrClosed) {
			logger.Printf("keeper %s: the lease ended while the owner lives: %v", l.Keeper, err)
		}
	}()
	return l
}

// sweepKeepers reaps, through b, the runs whose keeper is gone from b's
// engine (keeper.Orphans): what a run left whose whole machine died, seen
// from any machine. A run this machine's ledger has is left to the
// ledger's judgement, which knows more.
func (c *config) sweepKeepers(ctx context.Context, b backend.Backend, scan *ledger.Scan, rep *Report) error {
	ke, ok := b.(keeperEngine)
	_, lok := b.(backend.RunLister)
	if !ok || !lok {
		return nil
	}
	orphans, err := keeper.Orphans(ctx, ke.Client(), c.now())
	if err != nil {
		return err
	}
	for _, o := range orphans {
		if scan != nil && scan.HasRun(o.RunID) {
			continue
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		t0 := time.Now()
		rr := RunReport{ID: o.RunID, Decision: Reaped, Reason: fmt.Sprintf("dead: its containers were kept by an engine-side keeper, and no keeper of it has been on the engine for more than its lease timeout (%s)", o.LeaseTimeout)}
		ids := make([]string, len(o.Containers))
		byID := map[string]string{}
		for i, f := range o.Containers {
			ids[i], byID[f.ID] = f.ID, f.Name
		}
		if c.dryRun {
			rr.Decision = WouldReap
			for _, f := range o.Containers {
				rr.Removed = append(rr.Removed, Item{Kind: names.SandboxKind, Name: f.Name, Outcome: ledger.WouldRemove})
			}
			rep.add(c.finish(rr, t0))
			continue
		}
		// The one reaping of a run: its containers by id, then whatever
		// else carries its label (its networks).
		t := target{run: o.RunID, byLabel: true, afterKept: true}
		t.told[names.SandboxKind] = ids
		t.toldNames[names.SandboxKind] = byID
		res := reapRun(ctx, b, t)
		for _, it := range res.items {
			switch {
			case it.Outcome.Gone():
				rr.Removed = append(rr.Removed, it)
			case it.Outcome == ledger.NotOwned:
				rr.NotOwned = append(rr.NotOwned, it)
			default:
				rr.Kept = append(rr.Kept, it)
			}
		}
		if !res.engineClean() {
			rr.Decision = Kept
		}
		rep.add(c.finish(rr, t0))
	}
	return nil
}
