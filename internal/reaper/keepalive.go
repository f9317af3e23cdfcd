package reaper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
)

// Keep-alive sandboxes are never reaped with a run. With an idle
// time-to-live (RIGHTSIZE_REUSE_TTL, or Spec.ReuseTTL recorded by the test
// process that used it), the sweep removes one that no process has used
// for that long. "Used" is whatever this process can see of a use:
//
//   - a rightsize-go test process holds its use lock now
//     (ledger.KeepAliveUseLock, in the user's use dir, whatever the
//     cache dir): in use, never removed;
//   - its use records (ledger.KeepAliveUse): written when such a process
//     adopts or creates it, touched when its test ends and whenever a
//     sweep finds it in use;
//   - its registry entry in this cache dir: written when any member
//     created it, and read when any member adopts it, where the file
//     system records reads (ledger.StatReuseEntry);
//   - when the engine created it.
//
// What cannot be seen is kept: a keep-alive nothing here records (its
// users have another cache dir and another TMPDIR), and one whose registry
// entry another member wrote where the file system records no reads.

// EnvReuseTTL is the idle time-to-live of every keep-alive sandbox, a Go
// duration; unset, empty or "0" is none (a Spec.ReuseTTL still applies to
// its own sandbox).
const EnvReuseTTL = "RIGHTSIZE_REUSE_TTL"

// ReuseTTLFromEnv reads RIGHTSIZE_REUSE_TTL: 0 when there is none.
func ReuseTTLFromEnv() (time.Duration, error) {
	v := strings.TrimSpace(os.Getenv(EnvReuseTTL))
	if v == "" || v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q is not a positive Go duration such as 24h", EnvReuseTTL, v)
	}
	return d, nil
}

// KeepAliveUse is one keep-alive sandbox's use as a sweep sees it, and
// what the idle time-to-live makes of it.
type KeepAliveUse struct {
	Name string
	// LastUsed is the latest use seen (zero when none was); By says what
	// showed it.
	LastUsed time.Time
	By       string
	// InUse: a rightsize-go test process holds it now.
	InUse bool
	// TTL is the idle time-to-live that applies, 0 for none; From says
	// whose it is.
	TTL  time.Duration
	From string
	// SupersededBy is the keep-alive that replaced it: made later by the
	// same test, at the same place, from the same image repository.
	SupersededBy string
	// Unseen says why some of its users cannot be seen from here, which
	// keeps it however long it seems idle; "" when they all can.
	Unseen string
}

// Expires is when it expires; zero when it does not (no time-to-live, in
// use, or users that cannot be seen).
func (u KeepAliveUse) Expires() time.Time {
	if u.TTL <= 0 || u.InUse || u.Unseen != "" || u.LastUsed.IsZero() {
		return time.Time{}
	}
	return u.LastUsed.Add(u.TTL)
}

func (u KeepAliveUse) expired(now time.Time) bool {
	e := u.Expires()
	return !e.IsZero() && !now.Before(e)
}

// why says, for a report, why it expired.
func (u KeepAliveUse) why() string {
	s := fmt.Sprintf("idle since %s (%s), past its time-to-live of %s (%s)", ledger.FormatISO(u.LastUsed), u.By, u.TTL, u.From)
	if u.SupersededBy != "" {
		s += "; superseded by " + u.SupersededBy
	}
	return s
}

// kaView is what the judgement of one engine's keep-alive sandboxes reads
// besides the engine.
type kaView struct {
	backend, endpoint string
	cache             string
	useDir            string
	useErr            error
	useMissing        bool // the use dir is not there (yet)
	env               time.Duration
	// records are this engine's use records, from the use dir and the
	// cache dir's registry folder, by sandbox name.
	records map[string][]ledger.KeepAliveUse
	// entries are the cache dir's registry entries, by sandbox name.
	entries map[string][]kaEntry
	// reads: the registry's file system records reads.
	reads bool
}

type kaEntry struct {
	hash  string
	times ledger.ReuseEntryTimes
	// member: written by another member of the family, or unreadable;
	// only read where reads are not recorded (reading it would count).
	member bool
}

// newKAView reads the use records of engine b in cache and the use dir.
// The registry is read by readEntries, only when there is something to
// judge.
func newKAView(b backend.Backend, cache string, env time.Duration) *kaView {
	v := &kaView{backend: names.CanonicalBackend(b.Name()), endpoint: b.Endpoint(), cache: cache, env: env,
		records: map[string][]ledger.KeepAliveUse{}, entries: map[string][]kaEntry{}}
	// A sweep with nothing to judge makes no folder: a missing use dir
	// holds no lock and no record, and is made when one is written.
	v.useDir = ledger.UseDirPath("")
	if _, err := os.Lstat(v.useDir); err == nil || !errors.Is(err, fs.ErrNotExist) {
		v.useDir, v.useErr = ledger.UseDir("")
	} else {
		v.useMissing = true
	}
	v.readRecords()
	return v
}

// makeUseDir makes the use dir, before a lock or record is written in it.
func (v *kaView) makeUseDir() {
	if v.useMissing {
		v.useDir, v.useErr = ledger.UseDir("")
		v.useMissing = false
	}
}

func (v *kaView) readRecords() {
	clear(v.records)
	dirs := []string{v.regDir()}
	if v.useErr == nil {
		dirs = append(dirs, v.useDir)
	}
	for _, dir := range dirs {
		recs, _ := ledger.KeepAliveUses(dir)
		for _, r := range recs {
			if r.Backend == v.backend && r.Endpoint == v.endpoint {
				v.records[r.Name] = append(v.records[r.Name], r)
			}
		}
	}
}

// anyTTL reports whether some use record asks for a time-to-live.
func (v *kaView) anyTTL() bool {
	for _, rs := range v.records {
		for _, r := range rs {
			if r.TTL != "" {
				return true
			}
		}
	}
	return false
}

// readEntries reads what the registry says, and whether its file system
// records reads.
func (v *kaView) readEntries() {
	clear(v.entries)
	hashes, _ := ledger.ReuseHashes(v.cache)
	if len(hashes) > 0 {
		v.reads, _ = ledger.ReuseReadsRecorded(v.cache)
	}
	for _, h := range hashes {
		t, err := ledger.StatReuseEntry(v.cache, h)
		if err != nil {
			continue
		}
		e := kaEntry{hash: h, times: t}
		if !v.reads {
			re, err := ledger.ReadReuseEntry(v.cache, h)
			e.member = err != nil || re.Writer != "go"
		}
		name := ledger.ReuseName(h)
		v.entries[name] = append(v.entries[name], e)
	}
}

// useLock is the use lock of keep-alive name; nil when the use dir cannot
// be had.
func (v *kaView) useLock(name string) *ledger.FileLock {
	if v.useErr != nil {
		return nil
	}
	l, err := ledger.KeepAliveUseLock(v.useDir, v.backend, v.endpoint, name)
	if err != nil {
		return nil
	}
	return l
}

// inUse reports whether a process holds the use lock of name. A lock file
// that is not there is held by nobody, and is not made.
func (v *kaView) inUse(name string) bool {
	l := v.useLock(name)
	if l == nil {
		return false
	}
	if _, err := os.Lstat(l.Path()); err != nil {
		return false
	}
	ok, err := l.TryLock()
	if err != nil {
		return true // cannot tell: as if it were
	}
	if ok {
		l.Unlock()
	}
	return !ok
}

// ttlOf is the time-to-live name's last user asked for, else the
// environment's.
func (v *kaView) ttlOf(name string) (time.Duration, string) {
	var newest ledger.KeepAliveUse
	for _, r := range v.records[name] {
		if r.LastUsed.After(newest.LastUsed) {
			newest = r
		}
	}
	if d, err := time.ParseDuration(newest.TTL); err == nil && d > 0 {
		return d, "Spec.ReuseTTL of its last user"
	}
	if v.env > 0 {
		return v.env, EnvReuseTTL
	}
	return 0, ""
}

// judge judges every keep-alive of list (one engine's) at now; inUse says
// whether a process holds one now.
func (v *kaView) judge(list []backend.Description, now time.Time, inUse func(string) bool) []KeepAliveUse {
	out := make([]KeepAliveUse, 0, len(list))
	for _, d := range list {
		out = append(out, v.judgeOne(d, list, now, inUse(d.Name)))
	}
	slices.SortFunc(out, func(a, b KeepAliveUse) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func (v *kaView) judgeOne(d backend.Description, list []backend.Description, now time.Time, inUse bool) KeepAliveUse {
	u := KeepAliveUse{Name: d.Name, InUse: inUse}
	seen := func(t time.Time, by string) {
		if t.After(u.LastUsed) {
			u.LastUsed, u.By = t, by
		}
	}
	if !d.Created.IsZero() {
		seen(d.Created, "created, by the engine's account")
	}
	recs, ents := v.records[d.Name], v.entries[d.Name]
	for _, r := range recs {
		seen(r.LastUsed, "last used by a rightsize-go test process")
	}
	member := false
	for _, e := range ents {
		seen(e.times.Written, "its registry entry written")
		if !e.times.ReadAt.IsZero() {
			// The first read since the last sweep armed it: reads after
			// it are not recorded, so it may be in use until now.
			seen(now, fmt.Sprintf("its registry entry read at %s, an adoption by a member of the family", ledger.FormatISO(e.times.ReadAt)))
		}
		member = member || e.member
	}
	if inUse {
		seen(now, "in use: a rightsize-go test process holds it")
	}
	u.TTL, u.From = v.ttlOf(d.Name)
	if succ, ok := successor(d, list); ok {
		u.SupersededBy = succ.Name
		if t, from := v.ttlOf(succ.Name); t > 0 && (u.TTL == 0 || t < u.TTL) {
			u.TTL, u.From = t, "that of "+succ.Name+", which superseded it ("+from+")"
		}
	}
	switch {
	case v.useErr != nil:
		u.Unseen = "the use locks cannot be read: " + v.useErr.Error()
	case len(recs) == 0 && len(ents) == 0:
		u.Unseen = "nothing here records its use: its users have another cache dir and another TMPDIR, and their sweeps judge it"
	case member && !v.reads:
		u.Unseen = "its registry entry is another member's (Rust, Kotlin or Node), whose adoptions leave no trace where the file system records no reads, as this one does not"
	}
	return u
}

// successor is the keep-alive that superseded d: made later by the same
// test at the same place, from the same image repository (the newest such).
func successor(d backend.Description, list []backend.Description) (backend.Description, bool) {
	repo := imageRepo(d.Image)
	if d.Test == "" || d.TestPlace == "" || repo == "" {
		return backend.Description{}, false
	}
	var best backend.Description
	found := false
	for _, o := range list {
		if o.Name == d.Name || o.Test != d.Test || o.TestPlace != d.TestPlace || imageRepo(o.Image) != repo || !o.Created.After(d.Created) {
			continue
		}
		if !found || o.Created.After(best.Created) {
			best, found = o, true
		}
	}
	return best, found
}

// imageRepo is ref's repository: without its tag or digest; "" for an
// image id (an engine lists one when the tag moved to another image).
func imageRepo(ref string) string {
	if ref == "" || strings.HasPrefix(ref, "sha256:") || (len(ref) == 64 && names.LowerHex(ref)) {
		return ""
	}
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// JudgeKeepAlives is what a sweep would make of list, the keep-alive
// sandboxes of engine b, at now, with cache's registry: for each, its
// last use and when it expires. It only reads (rightsize ls).
func JudgeKeepAlives(b backend.Backend, cache string, list []backend.Description, now time.Time) ([]KeepAliveUse, error) {
	env, err := ReuseTTLFromEnv()
	v := newKAView(b, cache, env)
	v.readEntries()
	return v.judge(list, now, v.inUse), err
}

// sweepKeepAlives removes b's keep-alive sandboxes that expired, and
// records the uses it sees (a process holding one; a member's read of an
// entry). With no time-to-live anywhere, it asks the engine nothing.
func (c *config) sweepKeepAlives(ctx context.Context, b backend.Backend, rep *Report) {
	ka, ok := b.(backend.KeepAliver)
	if !ok {
		return
	}
	env, err := ReuseTTLFromEnv()
	if err != nil {
		rep.KeepAliveProblem = err.Error() + "; only a Spec.ReuseTTL applies"
	}
	v := newKAView(b, c.cache, env)
	if env == 0 && !v.anyTTL() {
		return
	}
	list, err := ka.KeepAlives(ctx)
	if err != nil {
		rep.KeepAliveProblem = "the keep-alive sandboxes could not be listed: " + err.Error()
		return
	}
	v.readEntries()
	now := c.now()
	byName := map[string]backend.Description{}
	for _, d := range list {
		byName[d.Name] = d
	}
	for _, u := range v.judge(list, now, v.inUse) {
		if ctx.Err() != nil {
			return
		}
		if !c.dryRun {
			v.sighted(u, now)
		}
		if !u.expired(now) {
			continue
		}
		if c.dryRun {
			rep.KeepAlives = append(rep.KeepAlives, Item{Kind: names.SandboxKind, Name: u.Name, Outcome: ledger.WouldRemove, Note: u.why()})
			continue
		}
		rep.KeepAlives = append(rep.KeepAlives, c.expire(ctx, ka, v, byName[u.Name], list))
	}
}

// sighted records what the sweep saw of u's use that no file says yet:
// a process holding it, a member's read of its entry (then armed for the
// next read, once the use is recorded).
func (v *kaView) sighted(u KeepAliveUse, now time.Time) {
	var armed []string
	for _, e := range v.entries[u.Name] {
		if !e.times.ReadAt.IsZero() {
			armed = append(armed, e.hash)
		}
	}
	if !u.InUse && len(armed) == 0 {
		return
	}
	v.touch(u.Name, now)
	for _, h := range armed {
		_ = ledger.ArmReuseEntry(v.cache, h)
	}
}

// touch marks name used at now in its use records, and writes them where
// there are none.
func (v *kaView) touch(name string, now time.Time) {
	v.makeUseDir()
	_, _ = ledger.EnsureSubdir(v.cache, ledger.ReuseDir)
	hash := ""
	if es := v.entries[name]; len(es) > 0 {
		hash = es[0].hash
	}
	dirs := []string{v.regDir()}
	if v.useErr == nil {
		dirs = append(dirs, v.useDir)
	}
	for _, dir := range dirs {
		path, err := ledger.KeepAliveUsePath(dir, v.backend, v.endpoint, name)
		if err != nil || ledger.TouchKeepAliveUse(path, now) == nil {
			continue
		}
		_ = ledger.WriteKeepAliveUse(dir, ledger.KeepAliveUse{Name: name, Backend: v.backend, Endpoint: v.endpoint, Hash: hash})
	}
}

// regDir is the cache dir's keep-alive registry folder, where its use
// records are kept too.
func (v *kaView) regDir() string { return filepath.Join(v.cache, ledger.ReuseDir) }

// expire removes the keep-alive d, judged expired, unless a process uses
// it: its use lock is taken exclusively first (a process that comes to
// adopt it meanwhile waits, then makes a new one), and its use judged
// again under it, so that a process that adopted it and let it go since
// the judgement keeps it.
func (c *config) expire(ctx context.Context, ka backend.KeepAliver, v *kaView, d backend.Description, list []backend.Description) Item {
	it := Item{Kind: names.SandboxKind, Name: d.Name}
	v.makeUseDir()
	lock := v.useLock(d.Name)
	if lock == nil {
		it.Outcome, it.Note = ledger.Kept, "its use lock cannot be had"
		return it
	}
	if hookBeforeLock != nil {
		hookBeforeLock(d.Name)
	}
	if ok, err := lock.TryLock(); err != nil || !ok {
		it.Outcome, it.Note = ledger.Kept, "in use: a rightsize-go test process took it during the sweep"
		v.touch(d.Name, c.now())
		return it
	}
	v.readRecords()
	v.readEntries()
	now := c.now()
	u := v.judgeOne(d, list, now, false)
	if !u.expired(now) {
		lock.Unlock()
		it.Outcome, it.Note = ledger.Kept, "used during the sweep ("+u.By+")"
		return it
	}
	since := time.Now()
	err := ka.RemoveKeepAlive(ctx, d.Name, d.KeepAlive)
	switch {
	case err == nil:
		it.Outcome = ledger.Removed
	case errors.Is(err, backend.ErrNotFound):
		it.Outcome = ledger.AlreadyGone
	default:
		lock.Unlock()
		it.Outcome, it.Note, it.err = ledger.Kept, "not removed: "+err.Error(), err
		return it
	}
	it.Note = u.why()
	var problems []string
	for _, e := range v.entries[d.Name] {
		if err := ledger.DeleteReuseEntry(v.cache, e.hash, since, time.Second); err != nil && !errors.Is(err, ledger.ErrReuseEntryRewritten) {
			problems = append(problems, fmt.Sprintf("registry entry %s not deleted: %v", e.hash[:12], err))
		}
	}
	v.forget(d.Name)
	lock.Remove()
	if len(problems) > 0 {
		it.Note += "; " + strings.Join(problems, "; ")
	}
	return it
}

// forget deletes name's use records, once it is gone.
func (v *kaView) forget(name string) {
	_ = ledger.RemoveKeepAliveUse(v.regDir(), v.backend, v.endpoint, name)
	if v.useErr == nil {
		_ = ledger.RemoveKeepAliveUse(v.useDir, v.backend, v.endpoint, name)
	}
}

// hookBeforeLock, when set (by tests), runs between the judgement that a
// keep-alive expired and the taking of its use lock: where a process that
// adopts it races the sweep.
var hookBeforeLock func(name string)
