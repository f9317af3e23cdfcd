package reaper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/keeper"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/proctree"
)

// Session is one process's part in the crash protocol, written once for
// everything that creates sandboxes (package sandboxtest, the command
// line's demo, the crash matrix):
//
//	Open     sweep dead runs once (within a budget), make this process's run
//	Admit    before a create: the watchdog (once), then the ledger line
//	Created  after it: tell the watchdog the engine's id
//	Release  remove what is the run's (checked by the engine), then forget
//	Forget   the caller removed it itself: forget
//	Close    release everything the run still has
//
// so that a crash at any instant leaves every sandbox either listed in the
// ledger (for the sweep) and known to the watchdog, or not created. A
// Session is safe for use by many goroutines at once.
type Session struct {
	drv   backend.Driver
	mode  Mode
	cache string
	runID string
	run   *ledger.Run // nil when the mode keeps no ledger
	sweep *Report
	// budget is what the sweep of Open had.
	budget time.Duration
	seq    atomic.Uint64
	pseq   atomic.Uint64

	stubOnce sync.Once
	stubbed  atomic.Bool // the stub was written
	wdOnce   sync.Once
	wd       atomic.Pointer[Watchdog]
	wdErr    error // set once, inside wdOnce
	// pwd is the watchdog of local processes: the native one, which can
	// prove which process it signals; the main one when it is native.
	pwdOnce sync.Once
	pwd     atomic.Pointer[Watchdog]
	// labelled: the watchdog finds the run's sandboxes and networks by the
	// engine's marks (backend.RunLister), and is told their ids after the
	// create; where it cannot list by mark (msb), it is told their names
	// before it.
	labelled bool

	mu  sync.Mutex
	ids map[toldKey]string // the ids the watchdog was told, by name
}

type toldKey struct {
	k    names.Kind
	name string
}

// Open starts this process's session on drv: RIGHTSIZE_REAPER decides
// (ModeFromEnv), the sweep of dead runs runs first, within its budget
// (WithBudget, else RIGHTSIZE_SWEEP_BUDGET, else DefaultBudget, which a
// value that is not a duration leaves: BudgetFromEnv says why), and
// nothing is written until the first
// Admit. The options are the sweep's. An error is for a ledger that cannot
// be used (a cache dir that is not the user's alone, say): no sandbox may
// be created then.
func Open(ctx context.Context, drv backend.Driver, opts ...Option) (*Session, error) {
	budget, _ := BudgetFromEnv()
	cfg := config{budget: budget}
	for _, o := range opts {
		o.apply(&cfg)
	}
	s := &Session{drv: drv, mode: ModeFromEnv(), ids: map[toldKey]string{}, budget: cfg.budget}
	_, s.labelled = drv.(backend.RunLister)
	cache := cfg.cache
	if cache == "" {
		dir, err := ledger.Dir()
		if err != nil {
			return nil, err
		}
		cache = dir
	}
	s.cache = cache
	if !s.mode.Ledger() {
		id, err := ledger.NewRunID()
		if err != nil {
			return nil, err
		}
		s.runID = id
		return s, nil
	}
	// The sweep comes before this process's own record, as in the family.
	// One that cannot finish leaves what it did not reach for the next;
	// this process's sandboxes do not depend on it.
	rep, err := Sweep(ctx, drv, append([]Option{WithCacheDir(cache), WithBudget(cfg.budget)}, opts...)...)
	var unsafe *ledger.UnsafeDirError
	if errors.As(err, &unsafe) {
		return nil, err
	}
	if err != nil && rep != nil && rep.Unfinished == "" {
		rep.Unfinished = err.Error()
	}
	s.sweep = rep
	owner := ledger.Owner{Backend: drv.Name(), Endpoint: drv.Endpoint(), DefaultEngine: drv.DefaultEndpoint()}
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

// Driver is the backend the session creates through.
func (s *Session) Driver() backend.Driver { return s.drv }

// RunID is this process's run id (8 hex digits).
func (s *Session) RunID() string { return s.runID }

// Mode is what RIGHTSIZE_REAPER asked for.
func (s *Session) Mode() Mode { return s.mode }

// CacheDir is the ledger's folder.
func (s *Session) CacheDir() string { return s.cache }

// Sweep is the report of the sweep Open made; nil when the mode keeps no
// ledger.
func (s *Session) Sweep() *Report { return s.sweep }

// SweepBudget is the budget the sweep of Open had (0: none).
func (s *Session) SweepBudget() time.Duration { return s.budget }

// Watchdog is the session's watchdog, nil until the first Admit (or when
// there is none).
func (s *Session) Watchdog() *Watchdog { return s.wd.Load() }

// Ledger is the session's run in the ledger; nil when the mode keeps none.
func (s *Session) Ledger() *ledger.Run { return s.run }

// Origin is what made name of kind k, as it was admitted; zero when not
// known (or when the mode keeps no ledger).
func (s *Session) Origin(k names.Kind, name string) origin.Origin {
	if s.run == nil {
		return origin.Origin{}
	}
	return s.run.Origin(k, name)
}

// NextName is the run's next sandbox name: rz-<run-id>-<n>.
func (s *Session) NextName() string {
	return "rz-" + s.runID + "-" + strconv.FormatUint(s.seq.Add(1), 10)
}

// WatchdogNote is what the first Admit says about the watchdog, for the
// test's log: that it started (and its pid), or why none could.
type WatchdogNote struct {
	Started bool
	PID     int
	Kind    string
	Err     error
	// Keeper is the name of the engine-side keeper whose lease the
	// watchdog holds; KeeperErr why the run has none where one was
	// wanted (RIGHTSIZE_WATCHDOG=engine, or an engine that is another
	// machine's): it does without.
	Keeper    string
	KeeperErr error
}

// NextProcessLine is the ledger line of the run's next local process,
// started in session sid: p<n>.<sid>.
func (s *Session) NextProcessLine(sid int) string {
	return proctree.Line(s.pseq.Add(1), sid)
}

// Admit prepares the creation of name (of kind k): the watchdog first, once
// per session (killed between its first ledger write and the watchdog's
// spawn, a process would leave that write to the next sweep), then the
// ledger line. Only then may the engine be asked to create it; an error
// means it must not be. The note is non-nil the first time only.
func (s *Session) Admit(k names.Kind, name string) (*WatchdogNote, error) {
	return s.AdmitFrom(k, name, origin.Origin{})
}

// AdmitFrom is Admit of what o made: the run's origins say so, before the
// ledger line, for its fate and `rightsize ls`.
func (s *Session) AdmitFrom(k names.Kind, name string, o origin.Origin) (*WatchdogNote, error) {
	if k == names.ProcessKind {
		// Local processes have a watchdog of their own (the main one
		// when it is native), and are told once started (Created): until
		// then their mark finds them, and the line is enough for the
		// sweep.
		s.writeStub()
		note := s.ensureProcessWatchdog()
		if s.run == nil {
			return note, nil
		}
		return note, s.run.AddFrom(k, name, o)
	}
	note := s.ensureWatchdog()
	if s.run == nil {
		return note, nil
	}
	if err := s.run.AddFrom(k, name, o); err != nil {
		return note, err
	}
	if !s.labelled || k == names.VolumeKind || k == names.ImageKind {
		// Without marks to find it by, the watchdog must know the name
		// before the create: one the owner dies in the middle of is
		// still removed. A named volume and an image are removed by name
		// with their marks checked (a volume's name is the test's own; an
		// image's id comes only at its build's end): told by name too,
		// they go in the watchdog's first pass, not after its settle.
		s.tell(k, name, name)
	}
	return note, nil
}

// Created tells the watchdog the engine's id for name, which it removes by
// that id the moment this process dies. For a local process (id: its pid
// and start, proctree.ID) the ledger line takes the id too, so that a
// sweep can prove its process group with no watchdog left.
func (s *Session) Created(k names.Kind, name, id string) {
	if id == "" || (!s.labelled && k != names.ProcessKind) {
		return
	}
	s.tell(k, id, name)
	if k == names.ProcessKind && s.run != nil {
		// The started line first: the command is never without one.
		if s.run.Add(k, proctree.Started(name, id)) == nil {
			_ = s.run.Remove(k, name)
		}
	}
}

// Untell tells the watchdog to forget name, which the caller is ending
// itself (a local process must be untold before its command is reaped:
// the watchdog takes what it was told as still held by its owner). Its
// ledger line stays until Forget.
func (s *Session) Untell(k names.Kind, name string) {
	s.mu.Lock()
	id, told := s.ids[toldKey{k, name}]
	delete(s.ids, toldKey{k, name})
	s.mu.Unlock()
	if told {
		if wd := s.watchdogFor(k); wd != nil {
			_ = wd.Untell(k, id, name)
		}
	}
}

// watchdogFor is the watchdog that serves kind k.
func (s *Session) watchdogFor(k names.Kind) *Watchdog {
	if k == names.ProcessKind {
		return s.pwd.Load()
	}
	return s.wd.Load()
}

func (s *Session) tell(k names.Kind, id, name string) {
	wd := s.watchdogFor(k)
	if wd == nil {
		return
	}
	if err := wd.Tell(k, id, name); err == nil {
		s.mu.Lock()
		s.ids[toldKey{k, name}] = id
		s.mu.Unlock()
	}
}

// lateCreateSettle is how long a create cut short by its context is given
// to be finished by the engine anyway before its name is looked up, as the
// watchdog's second pass does.
const lateCreateSettle = 2 * time.Second

// Create admits name, runs create, and tells the watchdog the id it
// returns; when create fails, it releases name (whatever of it the engine
// may have made) before returning the error. The note is Admit's. What
// made it is the origin ctx carries (origin.NewContext), which create's
// backend puts on it too.
func (s *Session) Create(ctx context.Context, k names.Kind, name string, create func(context.Context) (id string, err error)) (*WatchdogNote, error) {
	note, err := s.AdmitFrom(k, name, origin.FromContext(ctx))
	if err != nil {
		return note, err
	}
	id, err := create(ctx)
	if err == nil {
		s.Created(k, name, id)
		return note, nil
	}
	if ctx.Err() != nil {
		time.Sleep(lateCreateSettle)
	}
	rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if rerr := s.Release(rctx, k, []string{name})[0]; rerr != nil {
		err = fmt.Errorf("%w; and %v", err, rerr)
	}
	return note, err
}

// releaseTimeout bounds a release after a failed create.
const releaseTimeout = 60 * time.Second

// Release asks the backend to remove names (all of kind k) where the
// engine shows them as this run's, and forgets each that is gone, was
// never there, or is not the run's. It returns one outcome per name, in
// order: nil when the name is gone from the engine and the ledger; the
// backend's error when it may still exist, in which case it stays listed
// for the watchdog or the next sweep; or the ledger's error.
func (s *Session) Release(ctx context.Context, k names.Kind, list []string) []error {
	errs := make([]error, len(list))
	if len(list) == 0 {
		return errs
	}
	got := s.drv.Remove(ctx, k, s.runID, list)
	for i, name := range list {
		err := errors.New("the backend gave no outcome for it")
		if i < len(got) {
			err = got[i]
		}
		if err != nil && !errors.Is(err, backend.ErrNotFound) && !errors.Is(err, backend.ErrNotOwned) {
			errs[i] = fmt.Errorf("remove %s %s: %w (it stays in the ledger for the watchdog or the next sweep)", k, name, err)
			continue
		}
		errs[i] = s.Forget(k, name)
	}
	return errs
}

// Forget removes name's ledger line, and tells the watchdog, once the
// caller has confirmed it gone.
func (s *Session) Forget(k names.Kind, name string) error {
	s.Untell(k, name)
	if s.run == nil {
		return nil
	}
	if k == names.ProcessKind {
		// Its line as written before the start, or with its id after.
		var errs []error
		for _, l := range s.run.Names(k) {
			if l == name || strings.HasPrefix(l, name+".") {
				errs = append(errs, s.run.Remove(k, l))
			}
		}
		return errors.Join(errs...)
	}
	return s.run.Remove(k, name)
}

// Close releases whatever the run still lists, sandboxes before networks
// (a network cannot go while one is attached), then, where the backend
// can, whatever still carries the run's mark without being listed.
func (s *Session) Close(ctx context.Context) error {
	var errs []error
	if s.run != nil {
		t := target{run: s.runID}
		for _, k := range names.EngineKinds {
			t.listed[k] = s.run.Names(k)
		}
		// Local processes still listed (their Stop failed, or was never
		// called): what their marks, groups and descent prove.
		lines := s.run.Names(names.ProcessKind)
		if len(lines) > 0 {
			var marks []string
			var cmds []proctree.Command
			for _, l := range lines {
				if c, ok := proctree.ParseLine(s.runID, l); ok {
					marks = append(marks, c.Mark)
					cmds = append(cmds, c)
				}
			}
			t.procs, t.grace = &proctree.Scope{Marks: proctree.OfMarks(marks...), Commands: cmds}, proctree.DefaultGrace
		}
		res := reapRun(ctx, s.drv, t)
		for _, it := range res.items {
			switch {
			case it.Kind == names.ProcessKind:
			case it.Outcome.Gone() || it.Outcome == ledger.NotOwned:
				if err := s.Forget(it.Kind, it.Name); err != nil {
					errs = append(errs, err)
				}
			default:
				errs = append(errs, fmt.Errorf("remove %s %s: %w (it stays in the ledger for the watchdog or the next sweep)", it.Kind, it.Name, it.cause()))
			}
		}
		if len(lines) > 0 {
			if r := res.procs; r.Clean() {
				for _, l := range lines {
					if err := s.Forget(names.ProcessKind, l); err != nil {
						errs = append(errs, err)
					}
				}
			} else {
				err := fmt.Errorf("local processes of the run were left: %d escaped, %d not ended, %d not proven the run's", len(r.Escaped), len(r.Left), len(r.NotProven))
				errs = append(errs, errors.Join(err, r.Unproven))
			}
		}
	}
	if rc, ok := s.drv.(backend.RunCloser); ok {
		if _, err := rc.CloseRun(ctx, s.runID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing run %s: %w", s.runID, err)
	}
	return nil
}

// ensureProcessWatchdog makes sure a native watchdog serves local
// processes: the main one when it is native, else one of its own that
// knows no engine. The note is non-nil when it started one.
func (s *Session) ensureProcessWatchdog() *WatchdogNote {
	if s.run == nil || !s.mode.Watchdog() {
		return nil
	}
	var note *WatchdogNote
	s.pwdOnce.Do(func() {
		if wd := s.wd.Load(); wd != nil && wd.Kind == NativeWatchdog {
			s.pwd.Store(wd)
			return
		}
		note = &WatchdogNote{}
		wd, err := StartWatchdog(s.cache, s.run.RunsDir(), s.runID, backend.WatchdogPlan{ProcessesOnly: true})
		if err != nil {
			note.Err = fmt.Errorf("local processes: %w", err)
			return
		}
		s.pwd.Store(wd)
		note.Started, note.PID, note.Kind = true, wd.PID, wd.Kind
	})
	return note
}

// writeStub writes, once, what the run's fate will say of its owner, for
// whoever reaps it: the watchdog embeds it, a sweep reads it.
func (s *Session) writeStub() {
	if s.run == nil {
		return
	}
	s.stubOnce.Do(func() {
		_ = ledger.WriteOwnerStub(s.cache, s.runID, s.stubOwner())
		s.stubbed.Store(true)
	})
}

// Ended says, for whoever reaps what the run leaves (a command's process
// that left its session, say), that its owner ends normally, with code:
// the owner's stub, which the run's fate embeds, says so. Called last
// thing before the exit; nothing when the run never wrote its stub.
func (s *Session) Ended(code int) {
	if s.run == nil || !s.stubbed.Load() {
		return
	}
	owner := s.stubOwner()
	owner.Ended, owner.ExitCode = true, code
	_ = ledger.WriteOwnerStub(s.cache, s.runID, owner)
}

// stubOwner is what the owner's stub says of it.
func (s *Session) stubOwner() ledger.FateOwner {
	owner := OwnerInfo(s.drv.Name())
	owner.StartedISO = s.run.Record().StartedISO
	return owner
}

// ensureWatchdog spawns the watchdog once. A watchdog that cannot start is
// not fatal (the next sweep is the backstop): the note says why, once.
func (s *Session) ensureWatchdog() *WatchdogNote {
	if s.run == nil {
		return nil
	}
	s.writeStub()
	if !s.mode.Watchdog() {
		return nil
	}
	var note *WatchdogNote
	s.wdOnce.Do(func() {
		note = &WatchdogNote{}
		plan, err := s.drv.Watchdog(s.runID)
		if err == nil {
			var wd *Watchdog
			if ke, ok := wantKeeper(s.drv); ok {
				var k *keeper.Keeper
				wd, k, note.KeeperErr = s.startKeeper(ke, func(k *keeper.Keeper) (*Watchdog, error) {
					return startWatchdog(s.cache, s.run.RunsDir(), s.runID, plan, k)
				})
				if k != nil {
					note.Keeper = k.Name
				}
			}
			if wd == nil {
				wd, err = StartWatchdog(s.cache, s.run.RunsDir(), s.runID, plan)
			}
			if err == nil {
				s.wd.Store(wd)
				note.Started, note.PID, note.Kind = true, wd.PID, wd.Kind
			}
		}
		if err != nil {
			s.wdErr = err
			note.Err = err
		}
	})
	return note
}
