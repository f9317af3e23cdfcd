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

// envNativeKeeper gives a native watchdog the name of the run's keeper,
// whose lease it holds for as long as it lives, and envNativeKeeperSecret
// the lease's secret.
const (
	envNativeKeeper       = "RIGHTSIZE_NATIVE_WATCHDOG_KEEPER"
	envNativeKeeperSecret = "RIGHTSIZE_NATIVE_WATCHDOG_KEEPER_SECRET"
)

// holdWait bounds the owner's wait for its watchdog to take the keeper's
// lease, and the watchdog's tries: as long as the keeper waits for its
// first holder, from its own start. Whichever gives up first, the owner
// removes the keeper, and the watchdog serves alone.
const holdWait = keeper.FirstHoldWait

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
// what the run creates as kept. The watchdog is started as soon as the
// engine started the keeper: it gets going while the keeper checks its
// engine. When the engine refuses the keeper, or the watchdog cannot hold
// its lease, the keeper is removed and the error says why; the watchdog,
// when one started, serves without a keeper.
func (s *Session) startKeeper(ke keeperEngine, start func(k *keeper.Keeper) (*Watchdog, error)) (*Watchdog, *keeper.Keeper, error) {
	if !nativeCapable.Load() {
		return nil, nil, errors.New("only the native watchdog can hold a keeper's lease, and this program cannot run it (it does not import package sandboxtest, nor call reaper.WatchdogMain first thing)")
	}
	ctx := context.Background()
	var wd *Watchdog
	var wdErr error
	k, err := keeper.Start(ctx, ke.Client(), s.runID, keeper.Options{Started: func(k *keeper.Keeper) {
		wd, wdErr = start(k)
	}})
	if err != nil {
		// A watchdog started meanwhile is told "error:" by the keeper,
		// or finds it gone: it serves alone.
		return wd, nil, err
	}
	err = wdErr
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

// keptLease is the native watchdog's hold of its run's keeper: the lease,
// held for the watchdog's whole life, and taken again whenever it ends
// while the owner lives (the keeper was stopped, the engine restarted,
// the lease lapsed while this machine was suspended): the keeper is
// started again (keeper.Revive), so that the marks of what the run
// creates keep meaning that a keeper holds it.
type keptLease struct {
	cli    *client.Client
	run    string
	secret string
	lease  time.Duration
	logger *log.Logger

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop has let go
}

// reviveEvery bounds the wait between two tries to start a keeper again.
const reviveEvery = 2 * time.Second

// holdKeeper takes the lease of the keeper ref of run runID on drv's
// engine with its secret, and keeps it until Close. A lease that cannot be
// taken at first is logged, and the watchdog does its own work without it;
// one that ends while the owner lives is logged and taken again.
func holdKeeper(drv any, runID, ref, secret string, logger *log.Logger) *keptLease {
	ke, ok := drv.(keeperEngine)
	if !ok {
		logger.Printf("keeper %s: this backend cannot hold its lease", ref)
		return nil
	}
	// The watchdog is started as soon as the keeper is created: a second
	// try at its start makes it anew under its name.
	var l *keeper.Lease
	var err error
	for deadline, wait := time.Now().Add(holdWait), 20*time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		l, err = keeper.Hold(context.Background(), ke.Client(), ref, secret)
		if !errors.Is(err, keeper.ErrNotKeeper) || time.Now().Add(wait).After(deadline) {
			break
		}
		time.Sleep(wait)
	}
	if err != nil {
		logger.Printf("keeper %s: %v", ref, err)
		return nil
	}
	logger.Printf("holding the lease of keeper %s (timeout %s)", l.Keeper, l.Timeout)
	k := &keptLease{cli: ke.Client(), run: runID, secret: secret, lease: l.Timeout, logger: logger, done: make(chan struct{})}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	go k.keep(l)
	return k
}

// keep holds l, and the leases after it, until Close.
func (k *keptLease) keep(l *keeper.Lease) {
	defer close(k.done)
	for {
		select {
		case <-k.ctx.Done():
			_ = l.Close()
			return
		case <-l.Done():
		}
		k.logger.Printf("keeper %s: the lease ended while the owner lives: %v; starting the keeper again", l.Keeper, l.Err())
		if l = k.revive(); l == nil {
			k.removeStopped()
			return
		}
	}
}

// revive starts the run's keeper again and takes its lease, trying until
// it can or Close; nil after Close.
func (k *keptLease) revive() *keeper.Lease {
	wait, said := 100*time.Millisecond, ""
	for {
		id, err := keeper.Revive(k.ctx, k.cli, k.run, keeper.Options{LeaseTimeout: k.lease, Secret: k.secret})
		var l *keeper.Lease
		if err == nil {
			l, err = keeper.Hold(k.ctx, k.cli, id, k.secret)
		}
		if err == nil {
			k.logger.Printf("holding the lease of keeper %s again", l.Keeper)
			return l
		}
		if k.ctx.Err() != nil {
			return nil
		}
		if msg := err.Error(); msg != said {
			k.logger.Printf("starting the keeper again: %v (trying again every %s at most)", err, reviveEvery)
			said = msg
		}
		select {
		case <-k.ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, reviveEvery)
	}
}

// removeStopped removes the run's keeper when it is there but not
// running, as Close found it: the watchdog's work is done, and a keeper
// left stopped would hold off, for its lease timeout, a sweep of what the
// watchdog could not remove.
func (k *keptLease) removeStopped() {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout())
	defer cancel()
	if err := keeper.RemoveIfStopped(ctx, k.cli, k.run); err != nil {
		k.logger.Printf("keeper of run %s: %v", k.run, err)
	}
}

// Close lets go of the lease: the keeper removes what is left of the run,
// then itself.
func (k *keptLease) Close() {
	k.cancel()
	<-k.done
}

// removeStoppedKeeper removes the stopped keeper of a run that has
// nothing marked left (keeper.Orphans); nothing else of the run is
// touched.
func (c *config) removeStoppedKeeper(ctx context.Context, ke keeperEngine, o keeper.Orphan) RunReport {
	rr := RunReport{ID: o.RunID, Decision: Reaped, Reason: fmt.Sprintf("its engine-side keeper stopped more than its lease timeout (%s) ago, and nothing carries its kept mark: the stopped keeper alone is removed", o.LeaseTimeout)}
	outcome, note := ledger.Removed, ""
	if c.dryRun {
		rr.Decision, outcome = WouldReap, ledger.WouldRemove
	} else if err := keeper.RemoveStopped(ctx, ke.Client(), o); err != nil {
		rr.Decision, outcome, note = Kept, ledger.Kept, err.Error()
	}
	fileItems(&rr, foundItems(names.SandboxKind, o.Keepers, outcome, note))
	return rr
}

// foundItems are the containers, networks or volumes found, each of kind k with
// outcome o and note.
func foundItems(k names.Kind, found []keeper.Found, o ledger.Outcome, note string) []Item {
	items := make([]Item, len(found))
	for i, f := range found {
		items[i] = Item{Kind: k, Name: f.Name, Outcome: o, Note: note}
	}
	return items
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
		if len(o.Containers)+len(o.Networks)+len(o.Volumes) == 0 {
			rep.add(c.finish(c.removeStoppedKeeper(ctx, ke, o), t0))
			continue
		}
		rr := RunReport{ID: o.RunID, Decision: Reaped, Reason: fmt.Sprintf("dead: what it made was kept by an engine-side keeper, and no keeper of it has run on the engine for more than its lease timeout (%s)", o.LeaseTimeout)}
		if c.dryRun {
			rr.Decision = WouldReap
			fileItems(&rr, foundItems(names.SandboxKind, o.Containers, ledger.WouldRemove, ""))
			fileItems(&rr, foundItems(names.NetworkKind, o.Networks, ledger.WouldRemove, ""))
			fileItems(&rr, foundItems(names.VolumeKind, o.Volumes, ledger.WouldRemove, ""))
			rep.add(c.finish(rr, t0))
			continue
		}
		// The one reaping of a run: its marked containers by id, its
		// marked networks and volumes by name as a run's lists name them
		// (a network still held by a container's endpoint is asked again),
		// then whatever else carries its label.
		t := target{run: o.RunID, byLabel: true, afterKept: true}
		t.toldNames[names.SandboxKind] = map[string]string{}
		for _, f := range o.Containers {
			t.told[names.SandboxKind] = append(t.told[names.SandboxKind], f.ID)
			t.toldNames[names.SandboxKind][f.ID] = f.Name
		}
		for k, found := range map[names.Kind][]keeper.Found{names.NetworkKind: o.Networks, names.VolumeKind: o.Volumes} {
			for _, f := range found {
				t.listed[k] = append(t.listed[k], f.Name)
			}
		}
		res := reapRun(ctx, b, t)
		fileItems(&rr, res.items)
		if !res.engineClean() {
			rr.Decision = Kept
		}
		// Judged dead: its stopped keeper goes whatever is kept for now,
		// which the marks alone bring to the next sweep.
		if err := keeper.RemoveStopped(ctx, ke.Client(), o); err != nil {
			rr.Decision = Kept
			fileItems(&rr, foundItems(names.SandboxKind, o.Keepers, ledger.Kept, err.Error()))
		}
		rep.add(c.finish(rr, t0))
	}
	return nil
}
