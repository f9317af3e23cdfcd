package reaper

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/ledger"
)

// StaleAfter is the age after which an unparseable record is taken to be
// abandoned rather than being written: the family's one hour.
const StaleAfter = time.Hour

// Option configures a Sweep.
type Option interface{ apply(*config) }

type config struct {
	cache    string
	own      string
	dryRun   bool
	logger   *slog.Logger
	now      func() time.Time
	liveness func(ledger.Record) ledger.Liveness
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithCacheDir sweeps the ledger in dir instead of the resolved cache dir.
func WithCacheDir(dir string) Option { return optionFunc(func(c *config) { c.cache = dir }) }

// WithOwnRun names this process's own run, which a sweep never touches.
func WithOwnRun(id string) Option { return optionFunc(func(c *config) { c.own = id }) }

// DryRun decides and reports but touches nothing: no removal, no file
// written or deleted, no lock taken.
func DryRun() Option { return optionFunc(func(c *config) { c.dryRun = true }) }

// WithLogger logs one line per decision and per removal to l. Without it a
// sweep prints nothing.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.logger = l }) }

// Sweep reaps the runs in the ledger whose owner is dead, through b: their
// sandboxes, then their networks, then their files. It leaves alone this
// process's own run, runs of another backend or another engine endpoint,
// runs whose owner is alive or cannot be judged, and unparseable records
// younger than an hour (they may be mid-write). A name leaves the ledger
// only when b confirmed it gone or never there; anything else keeps it, and
// the record, for a later sweep. Sibling processes sweeping at the same
// moment each claim a run with a lock before removing what it lists; a
// lock file left by a sweeper killed mid-claim is deleted once it is a
// minute old, no run goes with it, and nobody holds it.
//
// The error is for a ledger that cannot be read at all; everything about a
// single run is in its RunReport.
func Sweep(ctx context.Context, b backend.Backend, opts ...Option) (*Report, error) {
	cfg := config{now: time.Now, liveness: ledger.Judge}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.cache == "" {
		dir, err := ledger.Dir()
		if err != nil {
			return nil, err
		}
		cfg.cache = dir
	}
	start := time.Now()
	rep := &Report{CacheDir: cfg.cache, Backend: b.Name(), Endpoint: b.Endpoint(), DryRun: cfg.dryRun}
	runs, err := ledger.ListRuns(cfg.cache)
	if err != nil {
		return rep, err
	}
	now := cfg.now()
	for _, rf := range runs {
		if err := ctx.Err(); err != nil {
			rep.Took = time.Since(start)
			return rep, err
		}
		rr := cfg.decide(b, rf, now)
		if rr.Decision != LeftAlone {
			if cfg.dryRun {
				rr = cfg.preview(rf, rr)
			} else {
				rr = cfg.reap(ctx, b, rf, rr)
			}
		}
		cfg.log(rr)
		rep.Runs = append(rep.Runs, rr)
	}
	if !cfg.dryRun {
		removeStaleLocks(filepath.Join(cfg.cache, ledger.RunsDir), now)
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// decide returns LeftAlone with its reason, or a provisional Reaped with
// the reason the run may be reaped.
func (c *config) decide(b backend.Backend, rf ledger.RunFiles, now time.Time) RunReport {
	rr := RunReport{ID: rf.ID, Decision: LeftAlone, Problems: rf.Problems}
	if rf.ID == c.own {
		rr.Reason = "this process's own run"
		return rr
	}
	if rf.RecordErr != nil {
		age := rf.Age(now).Round(time.Second)
		if age < StaleAfter {
			rr.Reason = fmt.Sprintf("record unreadable (%v) and only %s old: it may be being written", rf.RecordErr, age)
			return rr
		}
		rr.Decision = Reaped
		rr.Reason = fmt.Sprintf("record unreadable (%v) and %s old: abandoned", rf.RecordErr, age)
		return rr
	}
	rec := rf.Record
	rr.Owner = rec
	if backend.Canonical(rec.Backend) != backend.Canonical(b.Name()) {
		rr.Reason = fmt.Sprintf("recorded for backend %s, this sweep uses %s", rec.Backend, b.Name())
		return rr
	}
	if rec.Endpoint == "" && b.Endpoint() != "" {
		// Another member of the family, which records no engine: its run is
		// on the engine a process without configuration reaches. Swept
		// through another one, every name would answer "not found" and be
		// forgotten while it still runs.
		if !b.DefaultEndpoint() {
			rr.Reason = fmt.Sprintf("recorded without an engine (as the other languages write it), so taken to be on the default one; this sweep uses %s, named explicitly", b.Endpoint())
			return rr
		}
	}
	if rec.Endpoint != "" && b.Endpoint() != "" && rec.Endpoint != b.Endpoint() {
		rr.Reason = fmt.Sprintf("recorded against engine %s, this sweep uses %s", rec.Endpoint, b.Endpoint())
		return rr
	}
	lv := c.liveness(rec)
	rr.Reason = lv.String()
	if lv.State == ledger.Dead {
		rr.Decision = Reaped
	}
	return rr
}

func (c *config) preview(rf ledger.RunFiles, rr RunReport) RunReport {
	rr.Decision = WouldReap
	l := rf.ReadLists()
	for _, n := range l.Sandboxes {
		rr.Removed = append(rr.Removed, Item{"sandbox", n, "would be removed"})
	}
	for _, n := range l.Networks {
		rr.Removed = append(rr.Removed, Item{"network", n, "would be removed"})
	}
	rr.Rejected = l.Rejected
	rr.Problems = append(rr.Problems, l.Problems...)
	return rr
}

func (c *config) reap(ctx context.Context, b backend.Backend, rf ledger.RunFiles, rr RunReport) RunReport {
	if !rf.HasSandboxes && !rf.HasNetworks && len(rf.Problems) == 0 {
		// A run that lists nothing leaves siblings nothing to share out,
		// and deleting its files twice is harmless: no claim. A lock file
		// is two metadata writes (create, unlink), most of the time of a
		// sweep of many such runs.
		if l := rf.ReadLists(); len(l.Sandboxes)+len(l.Networks)+len(l.Rejected)+len(l.Problems) == 0 {
			if !runExists(rf) {
				rr.Decision = LeftAlone
				rr.Reason += "; already reaped by another process"
				return rr
			}
			if err := rf.RemoveFiles(); err != nil {
				rr.Problems = append(rr.Problems, "delete files: "+err.Error())
				rr.Decision = Kept
				return rr
			}
			rr.Decision = Reaped
			return rr
		}
	}
	lockPath := filepath.Join(rf.Dir, rf.ID+ledger.LockExt)
	release, why := claim(lockPath)
	if release == nil {
		rr.Decision = LeftAlone
		rr.Reason += "; " + why
		return rr
	}
	defer release()
	// Between the listing and the lock, a sibling may have reaped the run.
	if !runExists(rf) {
		rr.Decision = LeftAlone
		rr.Reason += "; already reaped by another process"
		return rr
	}
	l := rf.ReadLists()
	rr.Rejected = l.Rejected
	rr.Problems = append(rr.Problems, l.Problems...)

	var keptS, keptN []string
	if len(l.Sandboxes) > 0 {
		errs := b.RemoveSandboxes(ctx, l.Sandboxes)
		for i, n := range l.Sandboxes {
			if it, ok := outcome("sandbox", n, errs[i]); ok {
				rr.Removed = append(rr.Removed, it)
			} else {
				rr.Kept = append(rr.Kept, it)
				keptS = append(keptS, n)
			}
		}
	}
	if len(l.Networks) > 0 {
		pending := l.Networks
		// A network in use may be held by a container removed a moment ago
		// (or by another network's endpoint): one more pass after the rest.
		for pass := 0; pass < 2 && len(pending) > 0; pass++ {
			errs := b.RemoveNetworks(ctx, pending)
			var again []string
			for i, n := range pending {
				it, ok := outcome("network", n, errs[i])
				switch {
				case ok:
					rr.Removed = append(rr.Removed, it)
				case pass == 0 && errors.Is(errs[i], backend.ErrInUse):
					again = append(again, n)
				default:
					rr.Kept = append(rr.Kept, it)
					keptN = append(keptN, n)
				}
			}
			pending = again
		}
	}

	_, sbxPath, netPath := ledger.Paths(rf.Dir, rf.ID)
	switch {
	case len(keptS) == 0 && len(keptN) == 0 && len(l.Problems) == 0:
		if err := rf.RemoveFiles(); err != nil {
			rr.Problems = append(rr.Problems, "delete files: "+err.Error())
			rr.Decision = Kept
			return rr
		}
		rr.Decision = Reaped
	default:
		rr.Decision = Kept
		if len(l.Problems) == 0 {
			// Rewrite only what was read: a file that could not be read
			// keeps whatever it holds.
			for _, w := range []struct {
				path  string
				names []string
			}{{sbxPath, keptS}, {netPath, keptN}} {
				if err := ledger.WriteLines(w.path, w.names); err != nil {
					rr.Problems = append(rr.Problems, err.Error())
				}
			}
		}
	}
	return rr
}

// claim takes the claim on a run whose lock file is lockPath. It returns
// the release, which removes the lock file and then unlocks it, or nil and
// why the claim was not taken.
//
// A holder removes the lock file before unlocking it, so a lock taken on a
// file opened just before that removal guards nothing: the next sweeper
// creates and locks a new file at the path. Only a lock on the file now at
// the path is a claim, and only its holder removes it; a sibling that opens
// it afterwards locks a fresh file and finds nothing left to do. (Windows
// orders the two steps the other way round; see the release.)
func claim(lockPath string) (release func(), why string) {
	lock := flock.New(lockPath, flock.SetPermissions(0o600))
	got, err := lock.TryLock()
	if err != nil {
		return nil, fmt.Sprintf("not reaped: cannot take %s: %v", lockPath, err)
	}
	if !got {
		return nil, "another process is reaping it"
	}
	held, herr := lock.Stat()
	now, nerr := os.Lstat(lockPath)
	if herr != nil || nerr != nil || !os.SameFile(held, now) {
		lock.Unlock()
		return nil, "another process is reaping it"
	}
	return func() {
		if runtime.GOOS == "windows" {
			// Windows deletes no file that is open, this handle's included:
			// unlock (which closes it) first. A sibling that opens the file
			// in between makes the deletion fail, then takes the lock and
			// finds the run gone; its own release deletes the file.
			lock.Unlock()
			os.Remove(lockPath)
			return
		}
		os.Remove(lockPath)
		lock.Unlock()
	}, ""
}

// staleLockAge is how old a lock file with no run beside it must be before
// a sweep deletes it: far longer than any claim is held without its run's
// files existing (the holder deletes them, then its lock file, at once).
const staleLockAge = time.Minute

// removeStaleLocks deletes the lock files in runsDir that no run goes with
// any longer and that no process holds: what a sweeper killed between
// deleting a run's files and its lock file leaves behind. A lock file
// another process holds, or one younger than staleLockAge, stays.
func removeStaleLocks(runsDir string, now time.Time) {
	entries, err := os.ReadDir(runsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ledger.LockExt)
		if !ok || id == "" || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err != nil || now.Sub(info.ModTime()) < staleLockAge {
			continue
		}
		if runExists(ledger.RunFiles{Dir: runsDir, ID: id}) {
			continue
		}
		if release, _ := claim(filepath.Join(runsDir, id+ledger.LockExt)); release != nil {
			release()
		}
	}
}

// outcome classifies a removal: ok when the name may leave the ledger.
func outcome(kind, name string, err error) (Item, bool) {
	switch {
	case err == nil:
		return Item{kind, name, "removed"}, true
	case errors.Is(err, backend.ErrNotFound):
		return Item{kind, name, "not found"}, true
	case errors.Is(err, backend.ErrInUse):
		return Item{kind, name, "still in use: " + err.Error()}, false
	default:
		return Item{kind, name, err.Error()}, false
	}
}

func runExists(rf ledger.RunFiles) bool {
	rec, sbx, nets := ledger.Paths(rf.Dir, rf.ID)
	for _, p := range []string{rec, sbx, nets} {
		if _, err := os.Lstat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
}

func (c *config) log(rr RunReport) {
	if c.logger == nil {
		return
	}
	c.logger.Info("rightsize sweep", "run", rr.ID, "decision", string(rr.Decision), "reason", rr.Reason,
		"removed", len(rr.Removed), "kept", len(rr.Kept))
	for _, it := range rr.Kept {
		c.logger.Warn("rightsize sweep kept", "run", rr.ID, "kind", it.Kind, "name", it.Name, "why", it.Note)
	}
}
