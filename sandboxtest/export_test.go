package sandboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Info describes this process's session, for the external tests.
type Info struct {
	Backend  string
	Endpoint string
	CacheDir string
	RunID    string
	Mode     string
	// SweepBudget is the budget the first-use sweep had.
	SweepBudget time.Duration
	// WatchdogPID is 0 until the first sandbox (or when there is none).
	WatchdogPID  int
	WatchdogKind string
	Sweep        *reaper.Report
}

// Session sets up this process's session if needed and describes it.
func Session(ctx context.Context) (Info, error) {
	s, err := getSession(ctx)
	if err != nil {
		return Info{}, err
	}
	in := Info{Backend: s.Driver().Name(), Endpoint: s.Driver().Endpoint(), CacheDir: s.CacheDir(), RunID: s.RunID(), Mode: s.Mode().String(), Sweep: s.Sweep(), SweepBudget: s.SweepBudget()}
	if wd := s.Watchdog(); wd != nil {
		in.WatchdogPID, in.WatchdogKind = wd.PID, wd.Kind
	}
	return in, nil
}

// ProcessLines are the local processes this process's run lists.
func ProcessLines(tb testing.TB) []string {
	s, err := getSession(tb.Context())
	if err != nil || s.Ledger() == nil {
		return nil
	}
	return s.Ledger().Names(processKind)
}

// Sandbox is the backend's handle on the guard's sandbox.
func (g *Guard) Sandbox() backend.Sandbox { return g.sandbox() }

// ReuseIdentity is the family's keep-alive identity of spec.
func ReuseIdentity(spec Spec) ledger.ReuseIdentity { return reuseIdentity(spec) }

// ReuseExtra is rightsize-go's own part of spec's keep-alive identity.
func ReuseExtra(spec Spec) string { return reuseExtra(spec) }

// EnvReuse is the variable that turns keep-alive reuse on.
const EnvReuse = envReuse

// Program is a program's body, as Main runs it.
type Program func() int

func (p Program) Run() int { return p() }

// RunMain is Main without its exit: it returns the code Main would exit with.
func RunMain(m TestingM, opts ...Option) int {
	var cfg mainConfig
	for _, o := range opts {
		o.applyMain(&cfg)
	}
	return runMainWith(m, cfg)
}
