package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/proctree"
)

// StaleAfter is the age after which a temporary file that a killed writer
// of any member left in the runs folder is deleted.
const StaleAfter = time.Hour

// DefaultBudget bounds the sweep a test process makes at its first use:
// past it the sweep stops, keeps what it did not reach for a later one,
// and lets the test go on. An engine that takes removals and never answers
// costs a test no more than this. RIGHTSIZE_SWEEP_BUDGET sets another
// (BudgetFromEnv).
const DefaultBudget = 5 * time.Second

// EnvSweepBudget is the budget of the sweep a test process makes at its
// first use, a Go duration: a slow engine (a loaded CI machine) may need
// more than DefaultBudget to reap what dead runs left, a test suite that
// must start at once less.
const EnvSweepBudget = "RIGHTSIZE_SWEEP_BUDGET"

// BudgetFromEnv reads RIGHTSIZE_SWEEP_BUDGET: DefaultBudget when it is
// unset or empty, and, with an error saying why, when it is not a positive
// Go duration.
func BudgetFromEnv() (time.Duration, error) {
	v := strings.TrimSpace(os.Getenv(EnvSweepBudget))
	if v == "" {
		return DefaultBudget, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return DefaultBudget, fmt.Errorf("%s=%q is not a positive Go duration such as 30s: the sweep's budget is %s", EnvSweepBudget, v, DefaultBudget)
	}
	return d, nil
}

// Option configures a Sweep.
type Option interface{ apply(*config) }

type config struct {
	cache    string
	own      string
	only     string
	dryRun   bool
	budget   time.Duration
	logger   *slog.Logger
	now      func() time.Time
	liveness func(ledger.Record) ledger.Liveness
	fateBy   string
	// logMu keeps a run's lines together: runs are decided side by side.
	logMu sync.Mutex
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithCacheDir sweeps the ledger in dir instead of the resolved cache dir.
func WithCacheDir(dir string) Option { return optionFunc(func(c *config) { c.cache = dir }) }

// DryRun decides and reports but touches nothing: no removal, no file
// written or deleted, no lock taken.
func DryRun() Option { return optionFunc(func(c *config) { c.dryRun = true }) }

// WithLogger logs one line per decision and per removal to l. Without it a
// sweep prints nothing.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.logger = l }) }

// WithBudget stops the sweep once d has passed: runs it did not reach are
// left for a later sweep, and a removal under way is given up (its name
// stays listed). Zero means no bound.
func WithBudget(d time.Duration) Option { return optionFunc(func(c *config) { c.budget = d }) }

// OnlyRun sweeps the one run id, by hand: it is reaped unless its owner is
// proven alive, whatever else would have left it alone (no record, an
// unreadable one, an owner whose liveness cannot be judged from here). The
// ownership check still applies to every name it lists.
func OnlyRun(id string) Option { return optionFunc(func(c *config) { c.only = id }) }

// Sweep reaps the runs in the ledger whose owner is proven dead, through b
// (and, where the engine holds each run's claim, backend.LapseSweeper, the
// runs whose claim lapsed, ledger or not):
// their sandboxes, then their networks, then their files; only what the
// engine shows as the run's is removed (Backend.Remove). It leaves alone
// runs of another backend or another engine endpoint, runs whose owner is
// alive or cannot be judged, and runs without a readable record, however
// old: they are reported, and `rightsize sweep --run ID` removes one by
// hand. A name leaves the ledger only when b removed it, found none, or
// found it is not the run's; anything else keeps it, and the record, for a
// later sweep. Then, with a time-to-live (RIGHTSIZE_REUSE_TTL, or a
// Spec.ReuseTTL recorded by a test process), the keep-alive sandboxes
// idle past it (sweepKeepAlives). Sibling processes sweeping at the same moment each claim a
// run with a lock before removing what it lists.
//
// Runs are read a few batches ahead of their judgement, in the order
// their files lie on disk: memory grows with their number only by the
// folder's listing (about 40 bytes a run), never by what they hold.
// The error is for a ledger that cannot be read at all (or is not the
// user's alone); everything about a single run is in its RunReport.
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
	if cfg.budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, cfg.budget, errBudget)
		defer cancel()
	}
	start := time.Now()
	rep := &Report{CacheDir: cfg.cache, Backend: b.Name(), Endpoint: b.Endpoint(), DryRun: cfg.dryRun}
	defer func() {
		rep.sortRuns()
		rep.Took = time.Since(start)
	}()
	var scan *ledger.Scan
	if cfg.only != "" {
		rf, err := ledger.ReadRun(cfg.cache, cfg.only)
		if err != nil {
			return rep, err
		}
		rep.add(cfg.sweepOne(ctx, b, rf))
		if ctx.Err() != nil {
			rep.Unfinished = unfinished(context.Cause(ctx))
		}
		return rep, nil
	}
	scan, err := ledger.ScanRuns(cfg.cache)
	if err != nil {
		return rep, err
	}
	now := cfg.now()
	// Dead runs that list nothing are only files to delete, and most of
	// the runs of a large ledger are such: their deletions go to a few
	// workers, since a file system unlinks in parallel what it unlinks
	// slowly one by one (on an ext4 virtio disk, 200,000 files took 10.9 s
	// from one goroutine and 6.6 s from four). Runs with anything to
	// remove go one at a time, in the scan's order.
	var mu sync.Mutex
	add := func(rr RunReport) {
		mu.Lock()
		rep.add(rr)
		mu.Unlock()
	}
	deletes := make(chan deletion, 64)
	var workers sync.WaitGroup
	for range fileDeleters {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for d := range deletes {
				add(cfg.finish(cfg.removeFilesOnly(d.rf, d.rr), d.t0))
			}
		}()
	}
	err = scan.EachAhead(true, func(rf ledger.RunFiles) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		t0 := time.Now()
		rr := cfg.decide(b, rf)
		if rr.Decision == Reaped && !cfg.dryRun && filesOnly(rf) {
			deletes <- deletion{rf, rr, t0}
			return nil
		}
		add(cfg.sweepDecided(ctx, b, rf, rr, t0))
		return nil
	})
	if err == nil && ctx.Err() != nil {
		// The last run was cut short. (Deletions still queued finish
		// below: each is a file or two.)
		err = context.Cause(ctx)
	}
	close(deletes)
	workers.Wait()
	// Runs whose claim the engine itself holds (a Kubernetes Lease) and
	// let lapse: the engine removes what they own.
	if ls, ok := b.(backend.LapseSweeper); ok && ctx.Err() == nil {
		runs, lerr := ls.SweepLapsed(ctx, cfg.now(), cfg.dryRun)
		rep.Lapsed = runs
		if lerr != nil {
			rep.LapseProblem = lerr.Error()
		}
	}
	if err == nil {
		// Runs whose machine died with their ledger: only the engine
		// still knows them.
		if kerr := cfg.sweepKeepers(ctx, b, scan, rep); kerr != nil && ctx.Err() == nil {
			rep.Unfinished = "the engine-side keepers could not be judged: " + kerr.Error()
		} else if kerr != nil {
			err = context.Cause(ctx)
		}
	}
	if err == nil {
		// Keep-alive sandboxes idle past their time-to-live.
		cfg.sweepKeepAlives(ctx, b, rep)
		// What runs reaped a moment ago were made late (LateHorizon).
		cfg.sweepLate(ctx, b, rep)
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
	}
	if err != nil {
		rep.Unfinished = unfinished(err)
		if !errors.Is(err, errBudget) {
			return rep, err
		}
		return rep, nil
	}
	if !cfg.dryRun {
		rep.TempsRemoved = removeStaleTemps(scan, now)
		removeStaleLocks(scan, now)
		ledger.PruneFates(cfg.cache, now)
	}
	return rep, nil
}

// errBudget is the cause of a sweep's context when its budget is spent.
var errBudget = errors.New("its time budget was spent")

func unfinished(err error) string {
	if errors.Is(err, errBudget) {
		return err.Error()
	}
	return "interrupted: " + err.Error()
}

func (c *config) sweepOne(ctx context.Context, b backend.Backend, rf ledger.RunFiles) RunReport {
	t0 := time.Now()
	return c.sweepDecided(ctx, b, rf, c.decide(b, rf), t0)
}

// sweepDecided acts on decision rr about run rf, begun at t0.
func (c *config) sweepDecided(ctx context.Context, b backend.Backend, rf ledger.RunFiles, rr RunReport, t0 time.Time) RunReport {
	if rr.Decision != LeftAlone {
		if c.dryRun {
			rr = c.preview(ctx, b, rf, rr)
		} else {
			rr = c.reap(ctx, b, rf, rr)
			c.sweepFate(rf, rr, t0)
		}
	}
	if !c.dryRun && (rr.Decision == LeftAlone || rr.Decision == Kept) {
		if err := rf.Remember(); err != nil {
			rr.Problems = append(rr.Problems, "copy of its record: "+err.Error())
		}
	}
	return c.finish(rr, t0)
}

// finish times and logs a run's report.
func (c *config) finish(rr RunReport, t0 time.Time) RunReport {
	rr.Took = time.Since(t0)
	c.log(rr)
	return rr
}

// fileDeleters is how many goroutines delete the files of dead runs that
// list nothing.
const fileDeleters = 4

// A deletion is a dead run that lists nothing, decided at t0.
type deletion struct {
	rf ledger.RunFiles
	rr RunReport
	t0 time.Time
}

// filesOnly reports whether reaping rf is deleting its files and nothing
// else: no line file (so nothing to remove, no process to end, no fate to
// tell), no problem reading it, and no file that keeps its record.
func filesOnly(rf ledger.RunFiles) bool {
	return !rf.HasLines() && len(rf.Problems) == 0 && len(rf.Unknown) == 0
}

// removeFilesOnly reaps a run for which filesOnly holds. A run that lists
// nothing leaves siblings nothing to share out, and deleting its files
// twice is harmless: no claim. (A lock file is two metadata writes, create
// and unlink: most of the time of a sweep of many such runs.)
func (c *config) removeFilesOnly(rf ledger.RunFiles, rr RunReport) RunReport {
	if err := rf.RemoveFiles(); errors.Is(err, ledger.ErrLinesSince) {
		// Its owner wrote a line after the listing, then died: the
		// next sweep reads the run whole and reaps it. Nothing was
		// removed.
		rr.Decision = LeftAlone
		rr.Reason += "; " + err.Error()
		return rr
	} else if err != nil {
		rr.Problems = append(rr.Problems, "delete files: "+err.Error())
		rr.Decision = Kept
		return rr
	}
	rr.Decision = Reaped
	return rr
}

// byHand reports whether rf is the run a person named (OnlyRun).
func (c *config) byHand(rf ledger.RunFiles) bool { return c.only != "" && rf.ID == c.only }

// decide returns LeftAlone with its reason, or a provisional Reaped with
// the reason the run may be reaped.
func (c *config) decide(b backend.Backend, rf ledger.RunFiles) RunReport {
	rr := RunReport{ID: rf.ID, Decision: LeftAlone, Problems: rf.Problems}
	byHand := c.byHand(rf)
	if rf.ID == c.own {
		rr.Reason = "this process's own run"
		return rr
	}
	if errors.Is(rf.RecordErr, ledger.ErrNoRecord) && !runExists(rf) {
		// Its files went between the folder's listing and now: a sibling
		// sweep reaped it.
		rr.Reason = "already reaped by another process"
		return rr
	}
	if errors.Is(rf.RecordErr, ledger.ErrNoRecord) && !byHand && isLabelled(b) && (b.Endpoint() == "" || b.DefaultEndpoint()) {
		// Lines whose record a member deleted: dead if no process that
		// wrote them can be left. Their names are found, or not, as
		// another member's run's (namesNoEngine).
		if lv := ledger.JudgeLines(rf.ModTime); lv.State == ledger.Dead {
			rr.Liveness, rr.Reason, rr.Decision = lv, lv.String(), Reaped
			return rr
		}
	}
	if rf.RecordErr != nil {
		what := fmt.Sprintf("record unreadable (%v)", rf.RecordErr)
		if errors.Is(rf.RecordErr, ledger.ErrNoRecord) {
			// The state a live Node process is in after it pruned its
			// record and started another sandbox; or a writer killed
			// between its first line and its record.
			what = "no record"
		}
		if byHand {
			rr.Decision = Reaped
			rr.Reason = what + ": reaped by hand"
			return rr
		}
		rr.Reason = what + ": its owner is unknown, so it is never reaped by age; if you know it is dead: rightsize sweep --run " + rf.ID
		return rr
	}
	rec := rf.Record
	rr.Owner = rec
	// A run of local processes only (a process with no engine) is any
	// sweep's: ending its processes needs no engine.
	local := backend.Canonical(rec.Backend) == backend.Local
	if !local && backend.Canonical(rec.Backend) != backend.Canonical(b.Name()) {
		rr.Reason = fmt.Sprintf("recorded for backend %s, this sweep uses %s", rec.Backend, b.Name())
		return rr
	}
	if !local && rec.Endpoint == "" && b.Endpoint() != "" && !b.DefaultEndpoint() {
		// Another member of the family, which records no engine: its run is
		// on the engine a process without configuration reaches. Swept
		// through another one, every name would answer "not found" and be
		// forgotten while it still runs.
		rr.Reason = fmt.Sprintf("recorded without an engine (as the other languages write it), so taken to be on the default one; this sweep uses %s", b.Endpoint())
		return rr
	}
	if rec.Endpoint != "" && b.Endpoint() != "" && rec.Endpoint != b.Endpoint() {
		rr.Reason = fmt.Sprintf("recorded against engine %s, this sweep uses %s", rec.Endpoint, b.Endpoint())
		return rr
	}
	lv := c.liveness(rec)
	rr.Liveness, rr.Reason = lv, lv.String()
	switch {
	case lv.State == ledger.Dead:
		rr.Decision = Reaped
	case lv.State == ledger.Unknown && byHand:
		rr.Decision = Reaped
		rr.Reason += "; reaped by hand"
	}
	return rr
}

// preview is what reaping rf would do, decided as reap decides, with the
// engine's answers to lookups (backend.OwnershipChecker) in place of
// removals: what is not the run's, or is left for its member, is said so.
func (c *config) preview(ctx context.Context, b backend.Backend, rf ledger.RunFiles, rr RunReport) RunReport {
	rr.Decision = WouldReap
	l := rf.ReadLists()
	checker, _ := b.(backend.OwnershipChecker)
	byAge, _ := unlabelled(rf, l)
	for _, k := range names.Kinds {
		ns := l.Of(k)
		var errs []error
		if checker != nil && k != names.ProcessKind && len(ns) > 0 {
			errs = checker.CheckOwned(ctx, k, rf.ID, ns)
		} else {
			errs = make([]error, len(ns))
		}
		for i, n := range ns {
			err := outcomeAt(errs, i)
			if k == names.NetworkKind && errors.Is(err, backend.ErrUnlabelled) && slices.Contains(byAge, n) {
				// Removed by name if made since its owner started: a dry
				// run does not look at its age.
				err = nil
			}
			it := judge(rf, k, n, err)
			if it.Outcome == ledger.Removed {
				it.Outcome = ledger.WouldRemove
			}
			fileItems(&rr, []Item{it})
		}
	}
	rr.Rejected, rr.RejectedCount = l.Rejected, l.RejectedCount
	rr.Problems = append(rr.Problems, l.Problems...)
	return rr
}

// unlabelled are the networks of run rf that Go removes by name though
// they carry no run label, and the time they must have been made since
// (target.unlabelled). The members label no network. The systemf member's
// (its entries file's), and those of a run whose member can no longer see
// it (its record deleted, Go's copy left), go with the run: made since its
// owner started.
func unlabelled(rf ledger.RunFiles, l ledger.Lists) (ns []string, since time.Time) {
	started, err := rf.Record.Started()
	if !foreignWriter(rf) || err != nil || started.IsZero() {
		return nil, time.Time{}
	}
	if !rf.HasFamilyRecord() {
		return l.Of(names.NetworkKind), started.Add(-ledger.StartWindow)
	}
	return l.Entry(names.NetworkKind), started.Add(-ledger.StartWindow)
}

// outcomeAt is errs[i], or a failure when the backend gave no outcome.
func outcomeAt(errs []error, i int) error {
	if i < len(errs) {
		return errs[i]
	}
	return errors.New("the backend gave no outcome for it")
}

// judge is what the sweep makes of name n of kind k of run rf, given the
// engine's answer err to its removal (or, in a dry run, to its lookup).
func judge(rf ledger.RunFiles, k names.Kind, n string, err error) Item {
	it := outcome(k, n, err)
	if it.Outcome == ledger.NotOwned && k == names.NetworkKind && foreignWriter(rf) && rf.HasFamilyRecord() &&
		names.FamilyNetwork(n) && errors.Is(err, backend.ErrUnlabelled) {
		// The other members label their containers but not their
		// networks: the run's own member removes it by name, so its line
		// and the run's record stay for that member's sweep, by hand too
		// (a run dropped from the ledger is a network no one finds again).
		it.Outcome = ledger.LeftForMember
		it.Note = "another member's network, which it does not label: the run's files stay for that member's sweep, which removes it by name; Go removes only what it can prove the run's (" + it.Note + ")"
	}
	return it
}

func (c *config) reap(ctx context.Context, b backend.Backend, rf ledger.RunFiles, rr RunReport) RunReport {
	byHand := c.byHand(rf)
	if filesOnly(rf) {
		return c.removeFilesOnly(rf, rr)
	}
	lockPath := filepath.Join(rf.Dir, rf.ID+ledger.LockExt)
	release, why, err := claim(lockPath)
	if release == nil {
		rr.Decision = LeftAlone
		rr.Reason += "; " + why
		if errors.Is(err, ledger.ErrNotRegular) {
			rr.Refused = append(rr.Refused, err.Error())
		}
		return rr
	}
	defer release()
	// Between the listing and the lock, a sibling may have reaped the run.
	if !runExists(rf) {
		rr.Decision = LeftAlone
		rr.Reason += "; already reaped by another process"
		return rr
	}
	if pid := ledger.LiveWatchdog(c.cache, rf.ID); pid != 0 {
		// It tells the run's fate, with its owner, when it is done.
		rr.Decision = LeftAlone
		rr.Reason += fmt.Sprintf("; its watchdog (pid %d) is reaping it", pid)
		return rr
	}
	l := rf.ReadLists()
	rr.Rejected, rr.RejectedCount = l.Rejected, l.RejectedCount
	rr.Problems = append(rr.Problems, l.Problems...)
	if l.Oversized {
		// Not one name of it is read; what the engine shows carries the
		// run's label is still removed below.
		rr.Reason += "; a list is oversized: none of its lines was read"
	}

	// Local processes (rightsize-go's own lines): every live process
	// proven the run's is ended — carrying one of its marks, in the group
	// of a command its lines name while something proves that group the
	// command's (its leader, a marked member), or started by such a
	// process; what escaped, could not be ended or is in such a group
	// unproven keeps the lines. Marks are looked for whatever the list
	// says, so a list that could not be read does not spare them. Where
	// no process can be proven (macOS, Windows), a person's sweep of the
	// run forgets its lines without signalling anything; any other sweep
	// keeps them.
	t := target{run: rf.ID, byLabel: true, byHand: byHand, judge: func(k names.Kind, n string, err error) Item { return judge(rf, k, n, err) }}
	for _, k := range names.EngineKinds {
		t.listed[k] = l.Of(k)
	}
	t.unlabelled, t.since = unlabelled(rf, l)
	// The lines as read now, not the folder's listing: an owner alive when
	// the folder was listed may have started a process before it died.
	if rf.Has(names.ProcessKind) || len(l.Of(names.ProcessKind)) > 0 {
		t.grace = proctree.DefaultGrace
		if dl, ok := ctx.Deadline(); ok {
			// The sweep's budget bounds the grace too (a SIGKILL follows).
			t.grace = max(0, min(t.grace, time.Until(dl)/2))
		}
		var cmds []proctree.Command
		for _, line := range l.Of(names.ProcessKind) {
			if c, ok := proctree.ParseLine(rf.ID, line); ok && c.PID != 0 {
				cmds = append(cmds, c)
			}
		}
		t.procs = &proctree.Scope{Marks: proctree.OfRun(rf.ID), Commands: cmds}
	}
	// An engine that holds the run's claim (a Kubernetes Lease) is told
	// the run is over, as its watchdog would have: the claim would
	// otherwise stay until it lapsed, and its engine removes what it owns.
	// Only a claim the recorded owner made on this machine, as it was
	// last renewed, is dropped: the sweep judged that process dead, and no
	// other (a machine that shares the cache dir, a run with no record).
	if h, ok := b.(backend.RunHolder); ok && rr.Decision == Reaped {
		switch {
		case rf.RecordErr != nil || rf.Record.PID <= 0:
			rr.Reason += "; no record names the process that holds its claim on the engine: it lapses"
		default:
			if err := h.DropRun(ctx, rf.ID, rf.Record.PID); err != nil {
				rr.Reason += "; its claim on the engine could not be dropped (" + err.Error() + "): it lapses"
			}
		}
	}
	res := reapRun(ctx, b, t)
	leave := ""
	if !res.here && !byHand && namesNoEngine(b, rf) && l.Len() > 0 {
		if ctx.Err() != nil {
			// What this engine answered before the sweep was cut short
			// says nothing of where the run was: it is kept as it is.
			leave = "the sweep stopped (" + unfinished(context.Cause(ctx)) + ") before it could learn which engine the run used (it records none): kept as it is for a later sweep"
		} else {
			var note string
			leave, note = c.elsewhere(ctx, b, rf, t, res)
			if note != "" {
				rr.Reason += "; " + note
			}
		}
	}
	fileItems(&rr, res.items)
	kept := map[names.Kind][]string{}
	for _, k := range names.EngineKinds {
		if len(res.kept[k]) > 0 {
			kept[k] = res.kept[k]
		}
	}
	procsKept, asIs, here := res.procsKept, res.asIs, res.here
	if procsKept {
		// nil when the list could not be read: the run is kept all the
		// same, and an unread file is never rewritten.
		kept[names.ProcessKind] = l.Of(names.ProcessKind)
	}

	if leave != "" && !here {
		return leaveForItsEngine(rr, leave, procsKept || len(l.Problems) > 0 || ctx.Err() != nil)
	}

	// Files and lines of the run that no reader here understands keep its
	// record, for the member that wrote them.
	rr.ForMember = append(slices.Clone(rf.Unknown), foreignLines(rf, l)...)
	if len(kept) == 0 && !procsKept && !asIs && len(rr.ForMember) == 0 && (len(l.Problems) == 0 || byHand && isLabelled(b)) {
		// A list that could not be read keeps its run, unless a person
		// asked and the engine's labels say nothing of the run is left.
		if err := ledger.RemoveRunFiles(rf.Dir, rf.ID); err != nil {
			rr.Problems = append(rr.Problems, "delete files: "+err.Error())
			rr.Decision = Kept
			return rr
		}
		rr.Decision = Reaped
		return rr
	}
	rr.Decision = Kept
	if len(l.Problems) == 0 && !asIs {
		// Rewrite only what was read: a file that could not be read keeps
		// whatever it holds. Each file keeps what it listed.
		for _, k := range names.Kinds {
			if err := ledger.WriteLines(ledger.LinePath(rf.Dir, rf.ID, k), keptOf(kept[k], l.Plain(k))); err != nil {
				rr.Problems = append(rr.Problems, err.Error())
			}
		}
		if rf.HasEntries() {
			keep := func(k names.Kind, n string) bool { return slices.Contains(kept[k], n) }
			if err := ledger.RewriteEntries(ledger.EntriesPath(rf.Dir, rf.ID), keep); err != nil {
				rr.Problems = append(rr.Problems, err.Error())
			}
		}
	}
	return rr
}

// keptOf is, of listed, the names kept keeps, in listed's order.
func keptOf(kept, listed []string) []string {
	var out []string
	for _, n := range listed {
		if slices.Contains(kept, n) {
			out = append(out, n)
		}
	}
	return out
}

// foreignLines says how many lines of the run's entries file are of a
// kind no reader here knows.
func foreignLines(rf ledger.RunFiles, l ledger.Lists) []string {
	if l.Foreign == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: %d line(s) of a kind not known here", rf.ID+ledger.EntriesExt, l.Foreign)}
}

func isLabelled(b backend.Backend) bool {
	_, ok := b.(backend.RunLister)
	return ok
}

// foreignWriter reports whether another member of the family wrote the
// run's record (Go's records say "go"; the others' say nothing).
func foreignWriter(rf ledger.RunFiles) bool {
	return rf.RecordErr == nil && rf.Record.Writer != "go"
}

// escapedHint says what may be done about an escaped process: by hand, a
// sweep finds it again by its mark; without one, once its parent is gone,
// nothing will.
func escapedHint(run string, p proctree.Proc) string {
	if p.Marked {
		return "not signalled (rightsize sweep --run " + run + " ends it)"
	}
	return fmt.Sprintf("not signalled, and without the mark it is not found again once its parent is gone: kill %d yourself if it is to go", p.PID)
}

// outcome classifies a removal.
func outcome(k names.Kind, name string, err error) Item {
	it := classify(k, name, err)
	if !it.Outcome.Gone() {
		it.err = err
	}
	return it
}

func classify(k names.Kind, name string, err error) Item {
	switch {
	case err == nil:
		return Item{Kind: k, Name: name, Outcome: ledger.Removed}
	case errors.Is(err, backend.ErrNotFound):
		return Item{Kind: k, Name: name, Outcome: ledger.AlreadyGone}
	case errors.Is(err, backend.ErrNotOwned):
		return Item{Kind: k, Name: name, Outcome: ledger.NotOwned, Note: err.Error()}
	case errors.Is(err, backend.ErrInUse):
		return Item{Kind: k, Name: name, Outcome: ledger.Kept, Note: "still in use: " + err.Error()}
	default:
		return Item{Kind: k, Name: name, Outcome: ledger.Kept, Note: err.Error()}
	}
}

// claim takes the claim on a run whose lock file is lockPath. It returns
// the release, which removes the lock file and then unlocks it, or nil and
// why the claim was not taken, with the error when the lock could not even
// be tried (a FIFO squatting the lock file's name: ledger.ErrNotRegular).
//
// A holder removes the lock file before unlocking it (FileLock.Remove),
// so a lock taken on a file opened just before that removal guards
// nothing: FileLock locks only the file now at the path. Only its holder
// removes it; a sibling that opens it afterwards locks a fresh file and
// finds nothing left to do.
func claim(lockPath string) (release func(), why string, err error) {
	lock := ledger.NewFileLock(lockPath)
	got, err := lock.TryLock()
	if err != nil {
		return nil, fmt.Sprintf("not reaped: its lock cannot be taken (%v)", err), err
	}
	if !got {
		return nil, "another process is reaping it", nil
	}
	return func() { lock.Remove() }, "", nil
}

// staleLockAge is how old a lock file with no run beside it must be before
// a sweep deletes it: far longer than any claim is held without its run's
// files existing (the holder deletes them, then its lock file, at once).
const staleLockAge = time.Minute

// removeStaleLocks deletes the lock files that no run goes with any longer
// and that no process holds: what a sweeper killed between deleting a
// run's files and its lock file leaves behind. A lock file another process
// holds, or one younger than staleLockAge, stays.
func removeStaleLocks(scan *ledger.Scan, now time.Time) {
	for _, id := range scan.Locks() {
		p := filepath.Join(scan.Dir, id+ledger.LockExt)
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < staleLockAge {
			continue
		}
		if scan.HasRun(id) || runExists(ledger.RunFiles{Dir: scan.Dir, ID: id}) {
			continue
		}
		if release, _, _ := claim(p); release != nil {
			release()
		}
	}
}

// removeStaleTemps deletes the temporary files any member's writer left
// when killed between writing one and renaming it, once they are
// StaleAfter old (a younger one may be being written). Only regular files;
// a link is removed as a link, never followed.
func removeStaleTemps(scan *ledger.Scan, now time.Time) int {
	n := 0
	for _, name := range scan.Temps() {
		p := filepath.Join(scan.Dir, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < StaleAfter {
			continue
		}
		if os.Remove(p) == nil {
			n++
		}
	}
	return n
}

func runExists(rf ledger.RunFiles) bool { return ledger.HasFiles(rf.Dir, rf.ID) }

func (c *config) log(rr RunReport) {
	if c.logger == nil {
		return
	}
	c.logMu.Lock()
	defer c.logMu.Unlock()
	c.logger.Info("rightsize sweep", "run", rr.ID, "decision", string(rr.Decision), "reason", rr.Reason,
		"removed", len(rr.Removed), "kept", len(rr.Kept), "not_owned", len(rr.NotOwned))
	for _, it := range rr.Kept {
		c.logger.Warn("rightsize sweep kept", "run", rr.ID, "kind", it.Kind.String(), "name", it.Name, "why", it.Note)
	}
	for _, it := range rr.NotOwned {
		c.logger.Warn("rightsize sweep: not this run's, left alone", "run", rr.ID, "kind", it.Kind.String(), "name", it.Name, "why", it.Note)
	}
}
