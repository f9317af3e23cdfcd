package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/docker"
	_ "github.com/rightsize/rightsize-go/backend/msb" // registers the msb backend
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

const defaultStopGrace = backend.DefaultStopGrace

// session is this process's state, set up once at first backend use: the
// backend, the sweep of dead runs, this process's run, its watchdog.
type session struct {
	drv   backend.Driver
	mode  reaper.Mode
	cache string
	runID string
	run   *ledger.Run // nil when RIGHTSIZE_REAPER=off
	sweep *reaper.Report
	seq   atomic.Uint64

	wdOnce sync.Once
	wd     atomic.Pointer[reaper.Watchdog]
	wdErr  error // set once, inside wdOnce
}

var (
	sessMu  sync.Mutex
	sess    *session
	sessErr error
)

// sessionTimeout bounds the set-up of the session: finding the engine,
// sweeping, writing nothing yet.
const sessionTimeout = 2 * time.Minute

// getSession resolves the backend and sweeps dead runs, once per process.
// A failure is remembered: every later call reports it again. The set-up
// does not take the caller's cancellation: it serves every later test, and
// a first test whose context had already ended must not fail them all.
func getSession(ctx context.Context) (*session, error) {
	sessMu.Lock()
	defer sessMu.Unlock()
	if sess != nil || sessErr != nil {
		return sess, sessErr
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout)
	defer cancel()
	sess, sessErr = newSession(ctx)
	return sess, sessErr
}

func newSession(ctx context.Context) (*session, error) {
	s := &session{mode: reaper.ModeFromEnv()}
	cache, err := ledger.Dir()
	if err != nil {
		return nil, err
	}
	s.cache = cache
	drv, err := backend.Resolve(ctx)
	if err != nil {
		return nil, err
	}
	s.drv = drv
	if !s.mode.Ledger() {
		id, err := ledger.NewRunID()
		if err != nil {
			return nil, err
		}
		s.runID = id
		return s, nil
	}
	// The sweep comes before this process's own record, as in the family.
	// A sweep that cannot finish leaves what it did not reach for the next
	// one; this process's sandboxes do not depend on it.
	rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
	if err != nil {
		warnf("sandboxtest: the sweep of dead runs in %s stopped: %v; what it did not reach stays for a later sweep", cache, err)
	}
	s.sweep = rep
	owner := ledger.Owner{Backend: drv.Name(), Endpoint: drv.Endpoint()}
	if m, ok := drv.(interface{ MsbPath() string }); ok {
		owner.MsbPath = m.MsbPath()
	}
	run, err := ledger.NewRun(cache, owner)
	if err != nil {
		return nil, err
	}
	s.run, s.runID = run, run.ID()
	return s, nil
}

// nextName is the next sandbox name of this run: rz-<run-id>-<seq>.
func (s *session) nextName() string {
	return "rz-" + s.runID + "-" + strconv.FormatUint(s.seq.Add(1), 10)
}

// runLabels are the labels of this run's ordinary sandboxes and networks.
func (s *session) runLabels() map[string]string {
	return map[string]string{docker.LabelRunID: s.runID, docker.LabelRunIDAlt: s.runID}
}

// ensureWatchdog spawns the watchdog before this process's first sandbox.
// A watchdog that cannot start is not fatal (the next sweep is the
// backstop): the error is returned once, for the caller to log.
func (s *session) ensureWatchdog() (started bool, err error) {
	if s.run == nil || !s.mode.Watchdog() {
		return false, nil
	}
	first := false
	s.wdOnce.Do(func() {
		first = true
		plan, err := s.drv.WatchdogPlan()
		if err == nil {
			var wd *reaper.Watchdog
			wd, err = reaper.StartWatchdog(s.cache, s.run.RunsDir(), s.run.ID(), plan)
			s.wd.Store(wd)
		}
		if err != nil {
			s.wdErr = err
			// Once per process, where it is seen without -v too: a crash's
			// leftovers now wait for the next process's sweep.
			warnf("sandboxtest: no watchdog for run %s (%v); if this process is killed, its sandboxes stay until the next process's sweep", s.runID, err)
		}
	})
	if !first {
		return false, nil
	}
	return s.wdErr == nil, s.wdErr
}

// addSandbox writes the ledger line before creation.
func (s *session) addSandbox(name string) error {
	if s.run == nil {
		return nil
	}
	return s.run.AddSandbox(name)
}

// kind is what a ledger line names.
type kind int

const (
	sandboxKind kind = iota
	networkKind
)

func (k kind) String() string {
	if k == networkKind {
		return "network"
	}
	return "sandbox"
}

// forget removes the ledger line of name once it is confirmed gone.
func (s *session) forget(k kind, name string) error {
	switch {
	case s.run == nil:
		return nil
	case k == networkKind:
		return s.run.RemoveNetwork(name)
	default:
		return s.run.RemoveSandbox(name)
	}
}

// removeAndForget asks the backend to remove names (all of kind k), and
// removes the ledger line of each that the backend confirmed gone or found
// none of. It returns one outcome per name, in order: nil when the name is
// gone from the engine and the ledger; the backend's error when it may
// still exist, in which case its line stays for the watchdog or the next
// sweep; or the ledger's error.
func (s *session) removeAndForget(ctx context.Context, k kind, names []string) []error {
	if len(names) == 0 {
		return nil
	}
	var got []error
	if k == networkKind {
		got = s.drv.RemoveNetworks(ctx, names)
	} else {
		got = s.drv.RemoveSandboxes(ctx, names)
	}
	errs := make([]error, len(names))
	for i, name := range names {
		err := errors.New("the backend gave no outcome for it")
		if i < len(got) {
			err = got[i]
		}
		if err != nil && !errors.Is(err, backend.ErrNotFound) {
			errs[i] = fmt.Errorf("remove %s %s: %w (it stays in the ledger for the watchdog or the next sweep)", k, name, err)
			continue
		}
		errs[i] = s.forget(k, name)
	}
	return errs
}

// warnf reports something the user must know though no test failed, on
// stderr (where `go test` shows it for a failing package, or with -v).
func warnf(format string, args ...any) {
	fmt.Fprintf(stderr(), format+"\n", args...)
}

// Info describes this process's session, for logs and tests.
type Info struct {
	Backend  string
	Endpoint string
	CacheDir string
	RunID    string
	Mode     string
	// WatchdogPID is 0 until the first sandbox (or when there is none).
	WatchdogPID int
	// Sweep is the report of the sweep made at first use; nil when
	// RIGHTSIZE_REAPER=off.
	Sweep *reaper.Report
}

// Session sets up this process's session if needed (backend, sweep) and
// describes it.
func Session(ctx context.Context) (Info, error) {
	s, err := getSession(ctx)
	if err != nil {
		return Info{}, err
	}
	in := Info{Backend: s.drv.Name(), Endpoint: s.drv.Endpoint(), CacheDir: s.cache, RunID: s.runID, Mode: s.mode.String(), Sweep: s.sweep}
	if wd := s.wd.Load(); wd != nil {
		in.WatchdogPID = wd.PID
	}
	return in, nil
}
