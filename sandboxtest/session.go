package sandboxtest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

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
	wd     *reaper.Watchdog
	wdErr  error
}

var (
	sessMu  sync.Mutex
	sess    *session
	sessErr error
)

// getSession resolves the backend and sweeps dead runs, once per process.
// A failure is remembered: every later call reports it again.
func getSession(ctx context.Context) (*session, error) {
	sessMu.Lock()
	defer sessMu.Unlock()
	if sess != nil || sessErr != nil {
		return sess, sessErr
	}
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
	rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
	if err != nil {
		return nil, fmt.Errorf("sweep of %s: %w", cache, err)
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
		if err != nil {
			s.wdErr = err
			return
		}
		s.wd, s.wdErr = reaper.StartWatchdog(s.cache, s.run.RunsDir(), s.run.ID(), plan)
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

// forgetSandbox removes the ledger line once the sandbox is confirmed gone.
func (s *session) forgetSandbox(name string) error {
	if s.run == nil {
		return nil
	}
	return s.run.RemoveSandbox(name)
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
	if s.wd != nil {
		in.WatchdogPID = s.wd.PID
	}
	return in, nil
}
