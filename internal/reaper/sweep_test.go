package reaper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/pidns"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// The sweep's decisions, without an engine: a fake backend answers each
// name as the engine would (removed, not found, not this run's, in use,
// unreachable), and records what it was asked. The same ownership rules
// against the real engine are backend/docker's TestRemoveOwnership, and
// the watchdog's reaper's TestWatchdogOwnsWhatItRemoves.

// fakeBackend answers removals from objs: a name there is removed (nil) or
// refused (its error); a name not there is not found.
type fakeBackend struct {
	name, endpoint string
	notDefault     bool
	// block: Remove waits for its context to end, as an engine that takes
	// the call and never answers; blockNames, for those names alone.
	block      bool
	blockNames map[string]bool
	// lateNotFound: Remove of such a name says "not found", but only once
	// its context has ended (an answer that came after the deadline).
	lateNotFound map[string]bool

	mu      sync.Mutex
	objs    map[string]error
	asked   [2][]string
	runIDs  []string
	labeled map[string][]string // run id → ids carrying its label (RunLister)
	// inUseFor: a name there is refused as in use that many more times
	// before objs answers for it (an engine releasing endpoints late).
	inUseFor map[string]int
}

func newFake(objs map[string]error) *fakeBackend {
	if objs == nil {
		objs = map[string]error{}
	}
	return &fakeBackend{name: backend.Docker, endpoint: "unix:///fake.sock", objs: objs}
}

func (f *fakeBackend) Name() string          { return f.name }
func (f *fakeBackend) Endpoint() string      { return f.endpoint }
func (f *fakeBackend) DefaultEndpoint() bool { return !f.notDefault }
func (f *fakeBackend) Watchdog(string) (backend.WatchdogPlan, error) {
	return backend.WatchdogPlan{}, errors.New("fake: no watchdog")
}

func (f *fakeBackend) Remove(ctx context.Context, k backend.Kind, runID string, names []string) []error {
	f.mu.Lock()
	f.asked[k] = append(f.asked[k], names...)
	f.runIDs = append(f.runIDs, runID)
	f.mu.Unlock()
	errs := make([]error, len(names))
	for i, n := range names {
		if f.block || f.blockNames[n] {
			<-ctx.Done()
			errs[i] = fmt.Errorf("remove %s: %w: %v", n, backend.ErrUnreachable, context.Cause(ctx))
			continue
		}
		if f.lateNotFound[n] {
			<-ctx.Done()
			errs[i] = fmt.Errorf("remove %s: %w", n, backend.ErrNotFound)
			continue
		}
		f.mu.Lock()
		ans, ok := f.objs[n]
		if f.inUseFor[n] > 0 {
			f.inUseFor[n]--
			ans = fmt.Errorf("%w: active endpoints", backend.ErrInUse)
		}
		switch {
		case !ok:
			errs[i] = fmt.Errorf("remove %s: %w", n, backend.ErrNotFound)
		case ans == nil:
			delete(f.objs, n)
		default:
			errs[i] = fmt.Errorf("remove %s: %w", n, ans)
		}
		f.mu.Unlock()
	}
	return errs
}

func (f *fakeBackend) names() (sandboxes, networks []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked[0]), slices.Clone(f.asked[1])
}

// labeledBackend is a fakeBackend whose engine marks runs (Docker's
// labels): a sweep also removes what carries the run's label unlisted.
type labeledBackend struct{ *fakeBackend }

func (l labeledBackend) ListRun(_ context.Context, k backend.Kind, runID string) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k != backend.SandboxKind {
		return nil, nil
	}
	var out []string
	for _, id := range l.labeled[runID] {
		if _, ok := l.objs[id]; ok {
			out = append(out, id)
		}
	}
	return out, nil
}

func (l labeledBackend) RemoveIDs(ctx context.Context, k backend.Kind, ids []string) []error {
	return l.fakeBackend.Remove(ctx, k, "", ids)
}

// sweepCase is one run in a ledger of its own, and what one sweep must do
// with it. Names in removed, kept and notOwned are prefixes of
// Item.String(), in order.
type sweepCase struct {
	name   string
	reason string
	// prepare writes run id into runs.
	prepare  func(t *testing.T, s *sweepEnv, runs, id string)
	backend  func(*sweepEnv) backend.Backend
	opts     func(id string) []reaper.Option
	decision reaper.Decision
	because  []string // key words of the reason
	removed  []string
	kept     []string
	// cleanKept: a kept run that leaves the sweep clean (all it keeps is
	// left for another member's sweep).
	cleanKept bool
	notOwned  []string
	rejected  int
	// asked is what the backend must have been asked to remove: sandboxes,
	// then networks; nil: nothing.
	asked [2][]string
	// files left in runs afterwards, by suffix of the run id; a left-alone
	// or dry-run case must leave them byte for byte as they were.
	files []string
	check func(t *testing.T, s *sweepEnv, rep *reaper.Report)
}

type sweepEnv struct {
	me, dead ledger.Identity
	fake     *fakeBackend
}

func (s *sweepEnv) deadRecord() []byte {
	return recordOf(s.dead, backend.Docker, s.fake.endpoint).Marshal()
}

func TestSweepDecisions(t *testing.T) {
	env := func() *sweepEnv { return &sweepEnv{me: self(t), dead: deadProcess(t)} }
	unknown := func(ledger.Record) ledger.Liveness {
		return ledger.Liveness{State: ledger.Unknown, Reason: "judged unknown by the test"}
	}
	old := time.Now().Add(-30 * 24 * time.Hour)
	backdate := func(t *testing.T, runs, id string) {
		for _, p := range []string{ledger.RecordPath(runs, id), ledger.LinePath(runs, id, ledger.SandboxKind)} {
			if _, err := os.Lstat(p); err == nil {
				must(t, os.Chtimes(p, old, old))
			}
		}
	}
	cases := []sweepCase{
		{
			name:   "dead",
			reason: "no process has the recorded pid: its sandbox goes, then its network, then its files",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-x-1"], s.fake.objs["rz-net-1"] = nil, nil
				writeRun(t, runs, id, s.deadRecord(), []string{"rz-x-1"}, []string{"rz-net-1"})
			},
			decision: reaper.Reaped,
			because:  []string{"dead", "no process has pid"},
			removed:  []string{"sandbox rz-x-1: removed", "network rz-net-1: removed"},
			asked:    [2][]string{{"rz-x-1"}, {"rz-net-1"}},
		},
		{
			name:   "dead, lists nothing",
			reason: "a record without line files: nothing to remove, the record is deleted (without a claim: no lock file is left either)",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, s.deadRecord(), nil, nil)
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
		},
		{
			name:   "dead, empty line files",
			reason: "line files that list nothing: claimed, read, and deleted with the record",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, s.deadRecord(), []string{}, []string{})
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
		},
		{
			name:   "dead, another boot",
			reason: "a record of another boot is dead whatever its pid (this process's own pid here)",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				if runtime.GOOS == "windows" {
					t.Skip("Windows records carry no boot id: a pid of another boot is told apart by its start, which differs")
				}
				r := recordOf(s.me, backend.Docker, s.fake.endpoint)
				r.BootID = "00000000-0000-0000-0000-000000000000"
				writeRun(t, runs, id, r.Marshal(), []string{"rz-never-1"}, nil)
			},
			decision: reaper.Reaped,
			because:  []string{"dead", "another boot"},
			removed:  []string{"sandbox rz-never-1: already gone"},
			asked:    [2][]string{{"rz-never-1"}},
		},
		{
			name:   "not this run's",
			reason: "names the engine shows are not the run's (another user's container, an id prefix, a keep-alive sandbox) leave the list and are never removed",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-x-1"] = nil
				s.fake.objs["postgres-dev"] = fmt.Errorf("%w: it carries no rightsize run label", backend.ErrNotOwned)
				s.fake.objs["rz-reuse-799aad5a3338"] = fmt.Errorf("%w: a keep-alive sandbox", backend.ErrNotOwned)
				writeRun(t, runs, id, s.deadRecord(), []string{"rz-x-1", "postgres-dev", "rz-reuse-799aad5a3338"}, nil)
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
			removed:  []string{"sandbox rz-x-1: removed"},
			notOwned: []string{"sandbox postgres-dev: not this run's (remove postgres-dev: not this run's: it carries no", "sandbox rz-reuse-799aad5a3338: not this run's"},
			asked:    [2][]string{{"rz-x-1", "postgres-dev", "rz-reuse-799aad5a3338"}},
			check: func(t *testing.T, s *sweepEnv, rep *reaper.Report) {
				if _, ok := s.fake.objs["postgres-dev"]; !ok {
					t.Error("postgres-dev was removed")
				}
				if s.fake.runIDs[0] != rep.Runs[0].ID {
					t.Errorf("ownership checked against run %q, want %s", s.fake.runIDs[0], rep.Runs[0].ID)
				}
			},
		},
		{
			name:   "alive, this process",
			reason: "the owner runs with the recorded start: nothing of it is touched",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-x-1"] = nil
				writeRun(t, runs, id, recordOf(s.me, backend.Docker, s.fake.endpoint).Marshal(), []string{"rz-x-1"}, nil)
			},
			decision: reaper.LeftAlone,
			because:  []string{"alive", "recorded start"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "alive, a child",
			reason: "another live process, judged by its real start",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				child := startSleeper(t)
				idn, ok, err := ledger.Lookup(child)
				if err != nil || !ok {
					t.Fatalf("look up child %d: %v %v", child, ok, err)
				}
				writeRun(t, runs, id, recordOf(idn, backend.Docker, s.fake.endpoint).Marshal(), []string{"rz-x-1"}, nil)
			},
			decision: reaper.LeftAlone,
			because:  []string{"alive", "recorded start"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "alive, a Node record",
			reason: "another member's record of a live process: judged by the 2 s window",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, fmt.Appendf(nil, `{"pid":%d,"startedIso":%q,"backend":"docker"}`, s.me.PID, ledger.FormatISO(s.me.Start)), []string{"rz-x-1"}, nil)
			},
			decision: reaper.LeftAlone,
			because:  []string{"alive", "within"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "own run",
			reason: "this process's own run is never swept even when its record says dead",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, s.deadRecord(), []string{"rz-x-1"}, nil)
			},
			opts:     func(id string) []reaper.Option { return []reaper.Option{reaper.WithOwnRun(id)} },
			decision: reaper.LeftAlone,
			because:  []string{"this process's own run"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "unknown liveness",
			reason: "an owner whose liveness cannot be judged from here is never reaped",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, s.deadRecord(), []string{"rz-x-1"}, nil)
			},
			opts:     func(string) []reaper.Option { return []reaper.Option{reaper.WithLiveness(unknown)} },
			decision: reaper.LeftAlone,
			because:  []string{"unknown", "judged unknown by the test"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "unknown liveness, by hand",
			reason: "rightsize sweep --run ID reaps a run whose owner cannot be judged, once a person says so",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-x-1"] = nil
				writeRun(t, runs, id, s.deadRecord(), []string{"rz-x-1"}, nil)
			},
			opts: func(id string) []reaper.Option {
				return []reaper.Option{reaper.WithLiveness(unknown), reaper.OnlyRun(id)}
			},
			decision: reaper.Reaped,
			because:  []string{"unknown", "reaped by hand"},
			removed:  []string{"sandbox rz-x-1: removed"},
			asked:    [2][]string{{"rz-x-1"}},
		},
		{
			name:   "alive, by hand",
			reason: "even by hand, a live owner's run is never reaped",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, recordOf(s.me, backend.Docker, s.fake.endpoint).Marshal(), []string{"rz-x-1"}, nil)
			},
			opts:     func(id string) []reaper.Option { return []reaper.Option{reaper.OnlyRun(id)} },
			decision: reaper.LeftAlone,
			because:  []string{"alive"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "other backend, msb",
			reason: "a docker process cannot remove msb sandboxes: the run waits for an msb process",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				r := recordOf(s.dead, backend.Msb, "")
				r.MsbPath = "/opt/msb/bin/msb"
				writeRun(t, runs, id, r.Marshal(), []string{"rz-msb-1"}, []string{"rz-net-msb"})
			},
			decision: reaper.LeftAlone,
			because:  []string{"backend msb", "this sweep uses docker"},
			files:    []string{".json", ".networks", ".sandboxes"},
		},
		{
			name:   "other backend, microsandbox",
			reason: `Rust writes "microsandbox" for msb: the same other backend, left alone, reported as msb`,
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, rustRecord(s.dead, "microsandbox"), []string{"rz-msb-1"}, nil)
			},
			decision: reaper.LeftAlone,
			because:  []string{"backend msb", "this sweep uses docker"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "microsandbox under an msb sweep",
			reason: `"microsandbox" is msb: an msb sweep reaps a dead Rust-written run`,
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.name, s.fake.endpoint = backend.Msb, ""
				s.fake.objs["rz-msb-1"], s.fake.objs["rz-msb-2"] = nil, nil
				writeRun(t, runs, id, rustRecord(s.dead, "microsandbox"), []string{"rz-msb-1", "rz-msb-2"}, nil)
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
			removed:  []string{"sandbox rz-msb-1: removed", "sandbox rz-msb-2: removed"},
			asked:    [2][]string{{"rz-msb-1", "rz-msb-2"}},
		},
		{
			name:   "other endpoint",
			reason: "a sweep against this engine never touches a run recorded against another",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, recordOf(s.dead, backend.Docker, "tcp://10.255.255.1:2375").Marshal(), []string{"rz-x-1"}, nil)
			},
			decision: reaper.LeftAlone,
			because:  []string{"engine tcp://10.255.255.1:2375", "this sweep uses unix:///fake.sock"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "foreign record, another engine named",
			reason: "another language's record names no engine, so it is taken to be on the default one: a sweep through another engine must not forget its names as not found",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.notDefault = true
				writeRun(t, runs, id, []byte(fmt.Sprintf(`{"pid":%d,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker"}`, s.dead.PID)), []string{"rz-x-1"}, nil)
			},
			decision: reaper.LeftAlone,
			because:  []string{"recorded without an engine"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "foreign record, default engine",
			reason: "the same record through the default engine (however DOCKER_HOST spells it) is reaped",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-x-1"] = nil
				writeRun(t, runs, id, []byte(fmt.Sprintf(`{"pid":%d,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker"}`, s.dead.PID)), []string{"rz-x-1"}, nil)
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
			removed:  []string{"sandbox rz-x-1: removed"},
			asked:    [2][]string{{"rz-x-1"}},
		},
		{
			name: "a Node run's unlabelled network",
			reason: "the other members do not label their networks: a dead Node run's container goes, its network (named as " +
				"the family names them) is kept listed for Node's own sweep, never removed by Go, and the sweep is still clean; " +
				"a network labelled for another run, or of another name, still leaves the list",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-x-1"] = nil
				s.fake.objs["rz-net-0d0e0a0d"] = fmt.Errorf("%w: %w", backend.ErrNotOwned, backend.ErrUnlabelled)
				s.fake.objs["rz-net-other"] = fmt.Errorf("%w: it is labelled for run 0badc0de", backend.ErrNotOwned)
				s.fake.objs["my-network"] = fmt.Errorf("%w: %w", backend.ErrNotOwned, backend.ErrUnlabelled)
				writeRun(t, runs, id, []byte(fmt.Sprintf(`{"pid":%d,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker"}`, s.dead.PID)),
					[]string{"rz-x-1"}, []string{"rz-net-0d0e0a0d", "rz-net-other", "my-network"})
			},
			decision:  reaper.Kept,
			because:   []string{"dead"},
			removed:   []string{"sandbox rz-x-1: removed"},
			kept:      []string{"network rz-net-0d0e0a0d: left for its member's sweep (another member's network"},
			cleanKept: true,
			notOwned:  []string{"network rz-net-other: not this run's", "network my-network: not this run's"},
			asked:     [2][]string{{"rz-x-1"}, {"rz-net-0d0e0a0d", "rz-net-other", "my-network"}},
			files:     []string{".json", ".networks"},
			check: func(t *testing.T, s *sweepEnv, rep *reaper.Report) {
				if _, ok := s.fake.objs["rz-net-0d0e0a0d"]; !ok {
					t.Error("the Node run's network was removed")
				}
				_, _, nets := ledger.Paths(filepath.Join(rep.CacheDir, ledger.RunsDir), rep.Runs[0].ID)
				assertFile(t, nets, "rz-net-0d0e0a0d\n")
			},
		},
		{
			name: "a Node run's unlabelled network, by hand",
			reason: "a person's sweep of the run keeps the line and the record too: dropped, the network is one " +
				"that Node's sweep, which removes it by name, never finds again",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-net-0d0e0a0d"] = fmt.Errorf("%w: %w", backend.ErrNotOwned, backend.ErrUnlabelled)
				writeRun(t, runs, id, []byte(fmt.Sprintf(`{"pid":%d,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker"}`, s.dead.PID)), nil, []string{"rz-net-0d0e0a0d"})
			},
			opts:      func(id string) []reaper.Option { return []reaper.Option{reaper.OnlyRun(id)} },
			decision:  reaper.Kept,
			because:   []string{"dead"},
			kept:      []string{"network rz-net-0d0e0a0d: left for its member's sweep (another member's network"},
			cleanKept: true,
			asked:     [2][]string{nil, {"rz-net-0d0e0a0d"}},
			files:     []string{".json", ".networks"},
		},
		{
			name:   "a Go run's unlabelled network",
			reason: "rightsize-go labels every network it makes: one of its lists without the label is not the run's, and leaves the list",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-net-1"] = fmt.Errorf("%w: %w", backend.ErrNotOwned, backend.ErrUnlabelled)
				writeRun(t, runs, id, s.deadRecord(), nil, []string{"rz-net-1"})
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
			notOwned: []string{"network rz-net-1: not this run's"},
			asked:    [2][]string{nil, {"rz-net-1"}},
		},
		{
			name:   "unparseable, old",
			reason: "an unreadable record is never reaped by age: its owner is unknown (a start time in a layout a reader did not know once cost a live owner its container)",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, []byte("\x00\xffgarbage"), []string{"rz-x-1"}, nil)
				backdate(t, runs, id)
			},
			decision: reaper.LeftAlone,
			because:  []string{"unreadable", "never reaped by age", "rightsize sweep --run"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "no record, old",
			reason: "lines without a record are what a live Node process leaves after pruning its record and starting another sandbox: left alone, however old",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, nil, []string{"rz-x-1"}, nil)
				backdate(t, runs, id)
			},
			decision: reaper.LeftAlone,
			because:  []string{"no record", "owner is unknown"},
			files:    []string{".sandboxes"},
		},
		{
			name:   "no record, by hand",
			reason: "a person who knows the run is dead reaps it by hand; the ownership check still holds",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-x-1"] = nil
				s.fake.objs["postgres-dev"] = fmt.Errorf("%w: no label", backend.ErrNotOwned)
				writeRun(t, runs, id, nil, []string{"rz-x-1", "postgres-dev"}, nil)
			},
			opts:     func(id string) []reaper.Option { return []reaper.Option{reaper.OnlyRun(id)} },
			decision: reaper.Reaped,
			because:  []string{"no record", "reaped by hand"},
			removed:  []string{"sandbox rz-x-1: removed"},
			notOwned: []string{"sandbox postgres-dev: not this run's"},
			asked:    [2][]string{{"rz-x-1", "postgres-dev"}},
		},
		{
			name: "removal failed",
			reason: "the engine is unreachable: nothing is known to be gone, so every name stays listed, " +
				"the record stays, and the report is not clean",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				for _, n := range []string{"rz-x-1", "rz-x-2", "rz-net-1"} {
					s.fake.objs[n] = fmt.Errorf("%w: connection refused", backend.ErrUnreachable)
				}
				writeRun(t, runs, id, s.deadRecord(), []string{"rz-x-1", "rz-x-2"}, []string{"rz-net-1"})
			},
			decision: reaper.Kept,
			because:  []string{"dead"},
			kept:     []string{"sandbox rz-x-1: kept (remove rz-x-1: engine unreachable", "sandbox rz-x-2: kept", "network rz-net-1: kept"},
			asked:    [2][]string{{"rz-x-1", "rz-x-2"}, {"rz-net-1"}},
			files:    []string{".json", ".networks", ".sandboxes"},
			check: func(t *testing.T, s *sweepEnv, rep *reaper.Report) {
				runs := filepath.Join(rep.CacheDir, ledger.RunsDir)
				_, sbx, nets := ledger.Paths(runs, rep.Runs[0].ID)
				assertFile(t, sbx, "rz-x-1\nrz-x-2\n")
				assertFile(t, nets, "rz-net-1\n")
			},
		},
		{
			name:   "network in use",
			reason: "a container the run does not list holds its network: kept, asked once more after the sandboxes",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-net-1"] = fmt.Errorf("%w: active endpoints", backend.ErrInUse)
				writeRun(t, runs, id, s.deadRecord(), nil, []string{"rz-net-1"})
			},
			decision: reaper.Kept,
			because:  []string{"dead"},
			kept:     []string{"network rz-net-1: kept (still in use"},
			asked:    [2][]string{nil, {"rz-net-1", "rz-net-1"}},
			files:    []string{".json", ".networks"},
			check: func(t *testing.T, s *sweepEnv, rep *reaper.Report) {
				s.fake.objs["rz-net-1"] = nil // its holder went
				rep2, err := reaper.Sweep(context.Background(), s.fake, reaper.WithCacheDir(rep.CacheDir))
				must(t, err)
				if rr := only(t, rep2); rr.Decision != reaper.Reaped {
					t.Errorf("second sweep: %s (%s), want reaped", rr.Decision, rr.Reason)
				}
			},
		},
		{
			name: "endpoints released late",
			reason: "the engine refuses the network of sandboxes it just removed for a moment: " +
				"asked again, further apart, until it goes",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-x-1"], s.fake.objs["rz-net-1"] = nil, nil
				s.fake.inUseFor = map[string]int{"rz-net-1": 4}
				writeRun(t, runs, id, s.deadRecord(), []string{"rz-x-1"}, []string{"rz-net-1"})
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
			removed:  []string{"sandbox rz-x-1: removed", "network rz-net-1: removed"},
			asked:    [2][]string{{"rz-x-1"}, {"rz-net-1", "rz-net-1", "rz-net-1", "rz-net-1", "rz-net-1"}},
		},
		{
			name:   "labelled, not listed",
			reason: "what the engine shows carries the dead run's label is the run's, listed or not: removed too",
			backend: func(s *sweepEnv) backend.Backend {
				return labeledBackend{s.fake}
			},
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-x-1"], s.fake.objs["0123456789abcdef"] = nil, nil
				s.fake.labeled = map[string][]string{id: {"0123456789abcdef"}}
				writeRun(t, runs, id, s.deadRecord(), []string{"rz-x-1"}, nil)
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
			removed:  []string{"sandbox rz-x-1: removed", "sandbox 0123456789abcdef: removed (labelled with the run, not listed)"},
			asked:    [2][]string{{"rz-x-1", "0123456789abcdef"}},
		},
		{
			name:   "rejected lines",
			reason: "lines that are not names are counted and reported, and never reach the backend; the valid names are reaped",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				s.fake.objs["rz-x-1"] = nil
				pw := filepath.Join(t.TempDir(), "PWNED")
				content := "$(touch " + pw + ")\n`touch " + pw + "`\n-f\nrz-x-1\nrz-a;touch " + pw + "\n" +
					strings.Repeat("x", 200) + "\n\x00rz-nul\nrz-\xc3\xa9\n  \t\n"
				must(t, os.WriteFile(ledger.RecordPath(runs, id), s.deadRecord(), 0o600))
				must(t, os.WriteFile(ledger.LinePath(runs, id, ledger.SandboxKind), []byte(content), 0o600))
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
			removed:  []string{"sandbox rz-x-1: removed"},
			rejected: 7,
			asked:    [2][]string{{"rz-x-1"}},
		},
		{
			name:   "oversized list",
			reason: "a line file past its bounds is not parsed into names at all: the run is kept, nothing asked",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				must(t, os.WriteFile(ledger.RecordPath(runs, id), s.deadRecord(), 0o600))
				must(t, os.WriteFile(ledger.LinePath(runs, id, ledger.SandboxKind), bytes.Repeat([]byte("X\ntE\n7U\n"), 200_000), 0o600))
			},
			decision: reaper.Kept,
			because:  []string{"dead", "oversized"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "symlinked .sandboxes",
			reason: "a line file that is a symbolic link is not followed: its target's names are never read, and the run is kept",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				target := filepath.Join(t.TempDir(), "elsewhere")
				must(t, os.WriteFile(target, []byte("postgres-dev\n"), 0o600))
				writeRun(t, runs, id, s.deadRecord(), nil, nil)
				must(t, os.Symlink(target, ledger.LinePath(runs, id, ledger.SandboxKind)))
			},
			decision: reaper.Kept,
			because:  []string{"dead"},
			files:    []string{".json", ".sandboxes"},
			check: func(t *testing.T, s *sweepEnv, rep *reaper.Report) {
				rr := rep.Runs[0]
				if !slices.ContainsFunc(rr.Problems, func(p string) bool { return strings.Contains(p, "symbolic link") }) {
					t.Errorf("problems %q do not mention the symbolic link", rr.Problems)
				}
			},
		},
		{
			name:   "dry run",
			reason: "DryRun decides and reports, and touches nothing: no removal, no file changed, no lock taken",
			prepare: func(t *testing.T, s *sweepEnv, runs, id string) {
				writeRun(t, runs, id, s.deadRecord(), []string{"rz-x-1"}, []string{"rz-net-dry"})
			},
			opts:     func(string) []reaper.Option { return []reaper.Option{reaper.DryRun()} },
			decision: reaper.WouldReap,
			because:  []string{"dead"},
			removed:  []string{"sandbox rz-x-1: would be removed", "network rz-net-dry: would be removed"},
			files:    []string{".json", ".networks", ".sandboxes"},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := env()
			s.fake = newFake(nil)
			cache := t.TempDir()
			runs := runsDir(t, cache)
			id := randHex(t, 8)
			tc.prepare(t, s, runs, id)
			before := snapshot(t, runs)

			var b backend.Backend = s.fake
			if tc.backend != nil {
				b = tc.backend(s)
			}
			opts := []reaper.Option{reaper.WithCacheDir(cache)}
			if tc.opts != nil {
				opts = append(opts, tc.opts(id)...)
			}
			rep, err := reaper.Sweep(context.Background(), b, opts...)
			if err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			rr := only(t, rep)
			var out bytes.Buffer
			rep.WriteTo(&out)
			t.Logf("%s (%s)\n%s", tc.name, tc.reason, out.String())
			if !pidns.InInitial() && strings.Contains(rr.Reason, "the record names no pid namespace") {
				t.Skipf("a record without a pid namespace is unknown from %s by design", pidns.Self())
			}

			if rr.ID != id || rr.Decision != tc.decision {
				t.Errorf("run %s: decision %q, want %q (%s)\nreason: %s", rr.ID, rr.Decision, tc.decision, tc.reason, rr.Reason)
			}
			for _, w := range tc.because {
				if !strings.Contains(rr.Reason, w) {
					t.Errorf("reason %q does not say %q", rr.Reason, w)
				}
			}
			checkItems(t, "removed", rr.Removed, tc.removed)
			checkItems(t, "kept", rr.Kept, tc.kept)
			checkItems(t, "not owned", rr.NotOwned, tc.notOwned)
			if rr.RejectedCount != tc.rejected {
				t.Errorf("rejected %d lines %v, want %d", rr.RejectedCount, rr.Rejected, tc.rejected)
			}
			if wantClean := tc.decision != reaper.Kept || tc.cleanKept; wantClean != rep.Clean() {
				t.Errorf("Report.Clean() = %v with decision %s, want %v", rep.Clean(), rr.Decision, wantClean)
			}
			sbx, nets := s.fake.names()
			if !slices.Equal(sbx, tc.asked[0]) || !slices.Equal(nets, tc.asked[1]) {
				t.Errorf("the backend was asked to remove sandboxes %q and networks %q, want %q and %q", sbx, nets, tc.asked[0], tc.asked[1])
			}
			for _, n := range append(sbx, nets...) {
				if !ledger.ValidName(n) {
					t.Errorf("the backend was handed %q, which is not a valid name", n)
				}
			}
			var wantFiles []string
			for _, suf := range tc.files {
				wantFiles = append(wantFiles, id+suf)
			}
			if got := withoutCopy(t, runs, listDir(t, runs)); !slices.Equal(got, wantFiles) {
				t.Errorf("runs folder holds %q, want %q", got, wantFiles)
			}
			if tc.decision == reaper.LeftAlone || tc.decision == reaper.WouldReap {
				if after := snapshotWithoutCopy(t, runs); !mapsEqual(before, after) {
					t.Errorf("the run's files changed:\nbefore %q\nafter  %q", before, after)
				}
			}
			if tc.check != nil {
				tc.check(t, s, rep)
			}
		})
	}
}

// only returns the report's one run.
func only(t *testing.T, rep *reaper.Report) reaper.RunReport {
	t.Helper()
	if len(rep.Runs) != 1 {
		t.Fatalf("the sweep saw %d runs, want 1: %+v", len(rep.Runs), rep.Runs)
	}
	return rep.Runs[0]
}

func checkItems(t *testing.T, what string, got []reaper.Item, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(got[i].String(), want[i])
	}
	if !ok {
		t.Errorf("%s %q, want items starting %q", what, got, want)
	}
}

func assertFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want {
		t.Errorf("%s = %q (%v), want %q", path, b, err, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// rustRecord is a record as the Rust member writes it: pretty-printed,
// whole seconds, none of rightsize-go's fields.
func rustRecord(id ledger.Identity, backendName string) []byte {
	return fmt.Appendf(nil, "{\n  \"pid\": %d,\n  \"startedIso\": %q,\n  \"backend\": %q\n}", id.PID, id.Start.UTC().Format("2006-01-02T15:04:05Z"), backendName)
}

// startSleeper starts a process that waits, ended when the test ends, and
// returns its pid.
func startSleeper(t *testing.T) int {
	t.Helper()
	cmd := sleeperCommand()
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// An engine that takes removals and never answers holds a sweep no longer
// than its budget: it stops, keeps what it did not finish, says so, and
// returns.
func TestSweepBudget(t *testing.T) {
	cache := t.TempDir()
	runs := runsDir(t, cache)
	dead := deadProcess(t)
	fake := newFake(map[string]error{"rz-x-1": nil})
	fake.block = true
	for range 3 {
		writeRun(t, runs, randHex(t, 8), recordOf(dead, backend.Docker, fake.endpoint).Marshal(), []string{"rz-x-1"}, nil)
	}
	start := time.Now()
	rep, err := reaper.Sweep(context.Background(), fake, reaper.WithCacheDir(cache), reaper.WithBudget(300*time.Millisecond))
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unfinished == "" || rep.Clean() || !strings.Contains(rep.Unfinished, "budget") {
		t.Errorf("Unfinished %q, Clean %v: want the budget named and the report not clean", rep.Unfinished, rep.Clean())
	}
	if took > 10*time.Second {
		t.Errorf("the sweep took %s with a 300 ms budget", took)
	}
	if n := len(listDir(t, runs)); n != 6 {
		t.Errorf("runs folder holds %d files, want the 3 runs' 6 kept", n)
	}
}

// A family run (no engine recorded) whose sweep the budget cut short is
// kept as it is, every line and its record: what this engine answered
// before (or just after) the budget ran out proves nothing of where the
// run was, and the reason says the sweep stopped.
func TestSweepBudgetCutsAFamilyRun(t *testing.T) {
	for _, tc := range []struct {
		name                string
		sandboxes, networks []string
		fake                func(*fakeBackend)
	}{
		{"its removal hangs", []string{"rz-x-1"}, nil, func(f *fakeBackend) { f.block = true }},
		{"a sandbox not here, its network hangs", []string{"rz-gone-1"}, []string{"rz-net-x"}, func(f *fakeBackend) { f.blockNames = map[string]bool{"rz-net-x": true} }},
		{"not found, said after the budget", []string{"rz-late-1"}, nil, func(f *fakeBackend) { f.lateNotFound = map[string]bool{"rz-late-1": true} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			runs := runsDir(t, cache)
			dead := deadProcess(t)
			fake := newFake(map[string]error{"rz-x-1": nil, "rz-net-x": nil})
			tc.fake(fake)
			id := randHex(t, 8)
			rec := fmt.Appendf(nil, `{"pid":%d,"startedIso":%q,"backend":"docker"}`, dead.PID, ledger.FormatISO(dead.Start))
			writeRun(t, runs, id, rec, tc.sandboxes, tc.networks)
			before := listDir(t, runs)
			lines := map[string][]byte{}
			for _, f := range before {
				lines[f], _ = os.ReadFile(filepath.Join(runs, f))
			}
			rep, err := reaper.Sweep(context.Background(), labeledBackend{fake}, reaper.WithCacheDir(cache), reaper.WithBudget(300*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Runs) != 1 {
				t.Fatalf("%d runs reported, want the one", len(rep.Runs))
			}
			rr := rep.Runs[0]
			if rr.Decision != reaper.Kept || strings.Contains(rr.Reason, "nothing it lists") || !strings.Contains(rr.Reason, "the sweep stopped") {
				t.Errorf("the family run whose sweep was cut: %s (%s); want kept, saying the sweep stopped, with no word of what this engine holds", rr.Decision, rr.Reason)
			}
			for f, b := range lines {
				if got, err := os.ReadFile(filepath.Join(runs, f)); err != nil || string(got) != string(b) {
					t.Errorf("%s: %q, %v; want it as it was, %q", f, got, err, b)
				}
			}
		})
	}
}

// RIGHTSIZE_SWEEP_BUDGET sets the first-use sweep's budget; what is not a
// positive duration leaves the default, with an error that names the
// variable and the value.
func TestBudgetFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
		bad  bool
	}{
		{"", reaper.DefaultBudget, false},
		{"  ", reaper.DefaultBudget, false},
		{"45s", 45 * time.Second, false},
		{"1m30s", 90 * time.Second, false},
		{"250ms", 250 * time.Millisecond, false},
		{"0", reaper.DefaultBudget, true},
		{"-3s", reaper.DefaultBudget, true},
		{"30", reaper.DefaultBudget, true},
		{"soon", reaper.DefaultBudget, true},
	} {
		t.Setenv(reaper.EnvSweepBudget, c.env)
		got, err := reaper.BudgetFromEnv()
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("%s=%q: %s, %v; want %s, an error %v", reaper.EnvSweepBudget, c.env, got, err, c.want, c.bad)
		}
		if err != nil && (!strings.Contains(err.Error(), reaper.EnvSweepBudget) || !strings.Contains(err.Error(), strconv.Quote(c.env))) {
			t.Errorf("%s=%q: the error %q names neither the variable nor the value", reaper.EnvSweepBudget, c.env, err)
		}
	}
}

// A network that stays in use after its run's sandboxes were removed (a
// sandbox that is not the run's joined it) is asked again only while the
// sweep's budget leaves time for it: the sweep keeps it, saying it is in
// use, and still reaches the next dead run.
func TestSweepNetworkInUseWithinBudget(t *testing.T) {
	cache := t.TempDir()
	runs := runsDir(t, cache)
	dead := deadProcess(t)
	fake := newFake(map[string]error{"rz-x-1": nil, "rz-x-2": nil, "rz-net-1": fmt.Errorf("%w: active endpoints", backend.ErrInUse)})
	first, second := "1"+randHex(t, 7), "2"+randHex(t, 7) // swept in this order
	writeRun(t, runs, first, recordOf(dead, backend.Docker, fake.endpoint).Marshal(), []string{"rz-x-1"}, []string{"rz-net-1"})
	writeRun(t, runs, second, recordOf(dead, backend.Docker, fake.endpoint).Marshal(), []string{"rz-x-2"}, nil)
	rep, err := reaper.Sweep(context.Background(), fake, reaper.WithCacheDir(cache), reaper.WithBudget(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unfinished != "" {
		t.Errorf("the sweep stopped early (%s): the network's passes took the budget", rep.Unfinished)
	}
	got := map[string]reaper.RunReport{}
	for _, rr := range rep.Runs {
		got[rr.ID] = rr
	}
	if rr := got[first]; rr.Decision != reaper.Kept || len(rr.Kept) != 1 || !strings.Contains(rr.Kept[0].String(), "still in use") {
		t.Errorf("the run whose network stays in use: %s, kept %v; want kept, the network still in use", rr.Decision, rr.Kept)
	}
	if rr := got[second]; rr.Decision != reaper.Reaped {
		t.Errorf("the next dead run: %s (%s), want reaped", rr.Decision, rr.Reason)
	}
	if _, nets := fake.names(); len(nets) < 2 {
		t.Errorf("the network was asked %d time(s), want again after the sandboxes went", len(nets))
	}
}

// Temporary files any member's writer left when killed are deleted once an
// hour old; a younger one may be being written and stays.
func TestSweepDeletesStaleTemps(t *testing.T) {
	cache := t.TempDir()
	runs := runsDir(t, cache)
	old := time.Now().Add(-2 * time.Hour)
	put := func(name string, mtime time.Time) {
		p := filepath.Join(runs, name)
		must(t, os.WriteFile(p, []byte("{"), 0o600))
		must(t, os.Chtimes(p, mtime, mtime))
	}
	put("1a2b3c4d.json.tmp", old)                     // Rust
	put(".5e6f7a8b.json.tmp-4242-1764000000000", old) // Node
	put("9c0d1e2f.json88221377.tmp", old)             // Kotlin
	put(".0a0b0c0d.sandboxes.tmp-1234", old)          // Go
	put(".1b1b1b1b.json.tmp-999", time.Now())         // being written
	put("notes.tmp", old)                             // not the ledger's
	rep, err := reaper.Sweep(context.Background(), newFake(nil), reaper.WithCacheDir(cache))
	must(t, err)
	if got := listDir(t, runs); !slices.Equal(got, []string{".1b1b1b1b.json.tmp-999", "notes.tmp"}) {
		t.Errorf("after the sweep: %q", got)
	}
	if rep.TempsRemoved != 4 {
		t.Errorf("TempsRemoved = %d, want 4", rep.TempsRemoved)
	}
}

// TestSweepDeletesStaleLockFiles: a sweeper killed between deleting a run's
// files and its lock file leaves the lock file alone in the folder. The
// next sweep deletes it once it is old, and only when no process holds it
// and no run goes with it.
func TestSweepDeletesStaleLockFiles(t *testing.T) {
	cache := t.TempDir()
	runs := runsDir(t, cache)
	old := time.Now().Add(-2 * time.Minute)
	put := func(name string, mtime time.Time) string {
		p := filepath.Join(runs, name)
		must(t, os.WriteFile(p, nil, 0o600))
		must(t, os.Chtimes(p, mtime, mtime))
		return p
	}
	put("0badc0de"+ledger.LockExt, old)         // abandoned: goes
	put("0fresh01"+ledger.LockExt, time.Now())  // may be mid-claim: stays
	held := put("0held001"+ledger.LockExt, old) // a live claim: stays
	put("0live001"+ledger.LockExt, old)         // its run is still here: stays
	rec, _ := json.Marshal(recordOf(self(t), "docker", ""))
	writeRun(t, runs, "0live001", rec, []string{"rz-0live001-1"}, nil)

	lock := ledger.NewFileLock(held)
	if got, err := lock.TryLock(); err != nil || !got {
		t.Fatalf("lock %s: %v, %v", held, got, err)
	}
	defer lock.Unlock()

	before := listDir(t, runs)
	if _, err := reaper.Sweep(context.Background(), stubBackend{name: "docker"}, reaper.WithCacheDir(cache), reaper.DryRun()); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, runs); !slices.Equal(got, before) {
		t.Fatalf("a dry run changed the folder: %q, want %q", got, before)
	}
	if _, err := reaper.Sweep(context.Background(), stubBackend{name: "docker"}, reaper.WithCacheDir(cache)); err != nil {
		t.Fatal(err)
	}
	want := []string{"0fresh01.lock", "0held001.lock", "0live001.json", "0live001.lock", "0live001.sandboxes"}
	if got := listDir(t, runs); !slices.Equal(got, want) {
		t.Errorf("after the sweep the folder holds %q, want %q", got, want)
	}
}

// A cache dir someone else could write to is refused before anything in
// it is read, and the sweep says so.
func TestSweepRefusesUnsafeCacheDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no mode bits to make a folder writable by others, and its ACL is not checked (internal/ledger/dir_windows.go)")
	}
	cache := t.TempDir()
	runs := runsDir(t, cache)
	writeRun(t, runs, "1a2b3c4d", deadRecordFor(t), []string{"rz-x-1"}, nil)
	must(t, os.Chmod(runs, 0o777))
	fake := newFake(map[string]error{"rz-x-1": nil})
	_, err := reaper.Sweep(context.Background(), fake, reaper.WithCacheDir(cache))
	var ue *ledger.UnsafeDirError
	if !errors.As(err, &ue) {
		t.Fatalf("Sweep = %v, want an *UnsafeDirError", err)
	}
	if s, n := fake.names(); len(s)+len(n) > 0 {
		t.Errorf("the backend was asked to remove %q %q", s, n)
	}
}

func deadRecordFor(t *testing.T) []byte {
	return recordOf(deadProcess(t), backend.Docker, "unix:///fake.sock").Marshal()
}

// The report of a sweep of many runs holds a bounded number of them one by
// one and counts the rest.
func TestSweepReportIsBounded(t *testing.T) {
	cache := t.TempDir()
	runs := runsDir(t, cache)
	rec := deadRecordFor(t)
	for i := range 1500 {
		must(t, os.WriteFile(ledger.RecordPath(runs, fmt.Sprintf("%08x", i)), rec, 0o600))
	}
	rep, err := reaper.Sweep(context.Background(), newFake(nil), reaper.WithCacheDir(cache))
	must(t, err)
	if rep.Seen != 1500 || rep.Count(reaper.Reaped) != 1500 || len(rep.Runs) >= 1500 || rep.Omitted != 1500-len(rep.Runs) {
		t.Errorf("Seen %d, reaped %d, held %d, omitted %d", rep.Seen, rep.Count(reaper.Reaped), len(rep.Runs), rep.Omitted)
	}
	if left := listDir(t, runs); len(left) != 0 {
		t.Errorf("%d files left", len(left))
	}
}
