package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	_ "github.com/rightsize/rightsize-go/internal/backend/docker" // registers the docker backend
	_ "github.com/rightsize/rightsize-go/internal/backend/memory" // registers the memory backend
	_ "github.com/rightsize/rightsize-go/internal/backend/msb"    // registers the msb backend
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/probe"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

func init() {
	// A test binary re-executed as its own native watchdog stops here,
	// before package testing reads a flag (reaper.WatchdogMain), or, when
	// its backend registers in a later init, there.
	reaper.WatchdogMain()
	probe.SetSession(getSession)
}

// stopIfWatchdog ends a program started as a watchdog whose backend never
// registered (reaper.WatchdogWaiting) before it does anything a test
// would: its tests must not run as a watchdog.
func stopIfWatchdog() {
	if reaper.WatchdogWaiting() {
		fmt.Fprintf(os.Stderr, "rightsize watchdog: the backend %s=%q never registered in this program; the watchdog does nothing\n", backend.EnvBackend, os.Getenv(backend.EnvBackend))
		os.Exit(2)
	}
}

const defaultStopGrace = backend.DefaultStopGrace

// Kinds, as the session and the backends name them.
const (
	sandboxKind = names.SandboxKind
	networkKind = names.NetworkKind
)

var (
	sessMu  sync.Mutex
	sess    *reaper.Session
	sessErr error
)

// sessionTimeout bounds the set-up of the session: finding the engine and
// sweeping (whose own budget is reaper.DefaultBudget unless
// RIGHTSIZE_SWEEP_BUDGET gives it more, which is added).
const sessionTimeout = 2 * time.Minute

// envHostOverride is testcontainers-go's variable for where published ports
// are reached.
const envHostOverride = "TESTCONTAINERS_HOST_OVERRIDE"

// getSession resolves the backend, sweeps dead runs and makes this
// process's run, once per process. A failure is remembered: every later
// call reports it again. The set-up does not take the caller's
// cancellation: it serves every later test, and a first test whose context
// had already ended must not fail them all.
func getSession(ctx context.Context) (*reaper.Session, error) {
	stopIfWatchdog()
	sessMu.Lock()
	defer sessMu.Unlock()
	if sess != nil || sessErr != nil {
		return sess, sessErr
	}
	reaper.TellEmptyCacheDir(stderr())
	// A longer sweep budget than the default lengthens the set-up as much.
	budget, _ := reaper.BudgetFromEnv()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout+max(0, budget-reaper.DefaultBudget))
	defer cancel()
	drv, err := backend.Resolve(ctx)
	if err != nil {
		sessErr = err
		return nil, err
	}
	s, err := reaper.Open(ctx, drv)
	if err != nil {
		drv.Close()
		sessErr = err
		return nil, err
	}
	// testcontainers-go decides on its own where a container's ports are
	// reached, and guesses wrong wherever /.dockerenv misleads it: a
	// Track(t) container, or one a test starts without rightsize, must
	// answer where the guard does. Only when the user set nothing.
	if _, set := os.LookupEnv(envHostOverride); !set && drv.Name() == backend.Docker && drv.Host() != "" {
		os.Setenv(envHostOverride, drv.Host())
	}
	if n, ok := drv.(interface{ Note() string }); ok && n.Note() != "" && s.TellNote(n.Note(), time.Now()) {
		// Once a day per host, not once per test binary of `go test ./...`.
		warnf("sandboxtest: %s", n.Note())
	}
	tellSweep(s)
	sess = s
	return s, nil
}

// openedSession is the session getSession made, nil when none was (it
// opens none): what Main's ending closes, checks and tells.
func openedSession() *reaper.Session {
	sessMu.Lock()
	defer sessMu.Unlock()
	return sess
}

// tellSweep reports what became of the runs that ended since a process
// last told (tellFates: a line per fate; the sweep this process just made
// writes one per run it reaped, a watchdog one per run it reaped); and,
// on stderr, when the sweep stopped early, why. Silence when there is
// nothing to tell.
func tellSweep(s *reaper.Session) {
	if s.Ledger() != nil {
		tellFates(s.CacheDir(), s.RunID())
	}
	rep := s.Sweep()
	if rep == nil {
		return
	}
	if _, err := reaper.BudgetFromEnv(); err != nil {
		warnf("rightsize: %v", err)
	}
	if rep.Unfinished != "" {
		warnf("rightsize: the sweep of dead runs stopped early (%s; its budget was %s, which %s sets); what it did not reach stays for a later sweep", rep.Unfinished, s.SweepBudget(), reaper.EnvSweepBudget)
	}
	for _, it := range rep.KeepAlives {
		if it.Outcome.Gone() {
			warnf("rightsize: keep-alive %s", it)
		}
	}
	if rep.KeepAliveProblem != "" {
		warnf("rightsize: keep-alive sandboxes: %s", termtext.Clean(rep.KeepAliveProblem))
	}
	for _, rr := range rep.Runs {
		for _, why := range rr.Refused {
			warnf("rightsize: run %s was not reaped: %s", termtext.Clean(rr.ID), termtext.Clean(why))
		}
	}
}

// warnf reports something the user must know though no test failed, on
// stderr (where `go test` shows it for a failing package, or with -v).
func warnf(format string, args ...any) {
	fmt.Fprintf(stderr(), format+"\n", args...)
}
