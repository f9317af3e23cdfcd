package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rightsize/rightsize-go/internal/origin"
)

// A fate says what became of one ended run: who noticed its owner's death,
// when, and what happened to each thing it had on the engine. Whoever
// reaps a run writes one — a watchdog of either kind, a sweep of any
// process, the command line — as <cache>/fates/<run>-<unix ms>.json
// (rightsize-go's own folder: the other members never read it), never
// over another (a taken name moves the next millisecond on); a run's
// second watchdog joins its share to the first's fate (JoinFate). Each is
// told once, by the first sandbox of a later process (ClaimTell), and kept
// until PruneFates drops it: the newest MaxFates, none older than
// MaxFateAge.
//
// The format (version 1) is documented here and in docs/after-a-crash.md:
//
//	{"version":1, "run":"1a2b3c4d", "by":"watchdog", "byPid":4300,
//	 "noticedIso":"2026-11-30T20:03:05.120Z", "finishedIso":"…",
//	 "owner":{"pid":4242, "startedIso":"…", "writer":"go",
//	          "command":"go test ./store", "backend":"docker",
//	          "ended":true, "exitCode":0},
//	 "items":[{"kind":"sandbox", "id":"…", "name":"rz-1a2b3c4d-1",
//	           "outcome":"removed", "test":"TestCheckout/eu",
//	           "place":"store_test.go:42"}, …],
//	 "itemsOmitted":0}
//
// by is "watchdog", "native watchdog", "sweep" or "rightsize sweep";
// outcome is one of the Fate* outcomes. Everything in a fate is data: a
// reader prints it through a terminal-safe filter, never runs it.
type Fate struct {
	Version      int        `json:"version"`
	Run          string     `json:"run"`
	By           string     `json:"by"`
	ByPID        int        `json:"byPid,omitempty"`
	NoticedISO   string     `json:"noticedIso,omitempty"`
	FinishedISO  string     `json:"finishedIso,omitempty"`
	Owner        FateOwner  `json:"owner"`
	Items        []FateItem `json:"items"`
	ItemsOmitted int        `json:"itemsOmitted,omitempty"`
	// Note is a word on the whole run (why it stopped early, say).
	Note string `json:"note,omitempty"`
}

// FateOwner is what is known of the run's owner.
type FateOwner struct {
	PID        int    `json:"pid,omitempty"`
	StartedISO string `json:"startedIso,omitempty"`
	// Writer is "go" for a rightsize-go run, else "" (another member).
	Writer  string `json:"writer,omitempty"`
	Command string `json:"command,omitempty"`
	Backend string `json:"backend,omitempty"`
	// The rest of the owner's identity as its record held it, so that a
	// reader of the fate can judge the owner as the record was judged
	// (Judge): a late look by label is made only for an owner proven
	// dead (reaper.LateHorizon).
	StartTicks   uint64 `json:"startTicks,omitempty"`
	BootID       string `json:"bootId,omitempty"`
	PidNamespace string `json:"pidNamespace,omitempty"`
	// Ended: the owner ended normally (through sandboxtest.Main, which
	// says so last thing), with ExitCode: whatever was left to reap, the
	// run did not die.
	Ended    bool `json:"ended,omitempty"`
	ExitCode int  `json:"exitCode,omitempty"`
}

// FateItem is one sandbox, network, command or local process of the run,
// with the test that made it ("test" and "place", as the run's origins
// said) when that is known.
type FateItem struct {
	Kind    string  `json:"kind"` // "sandbox", "network", "exec" or "process"
	ID      string  `json:"id,omitempty"`
	Name    string  `json:"name,omitempty"`
	Outcome Outcome `json:"outcome"`
	Note    string  `json:"note,omitempty"`
	origin.Origin
}

// ForgetAfter is how old the record of a dead run that records no engine
// must be before its names, found on no engine it may have used, are
// forgotten: long enough for a sweep from where the run ran (a CI job
// with its own DOCKER_HOST, a machine's other context) to come by first.
const ForgetAfter = 7 * 24 * time.Hour

// FateOutcomes are the outcomes of a fate's items, in the order a fate's
// line tells them.
var FateOutcomes = []Outcome{Removed, AlreadyGone, Forgotten, Ended, Kept, LeftForMember, Escaped, NotOwned}

// Bounds of the fates folder and of each fate.
const (
	MaxFates       = 200
	MaxFateAge     = 7 * 24 * time.Hour
	MaxFateItems   = 200
	MaxFateSize    = 256 << 10
	maxFateCommand = 512
	maxFateNote    = 300
)

// FateVersion is the version this package writes.
const FateVersion = 1

// FatesPath is the folder of cache's fates.
func FatesPath(cache string) string { return filepath.Join(cache, FatesDir) }

// WriteFate writes f (bounded: at most MaxFateItems items, long texts cut)
// as a new fate of cache, atomically, and returns its path. It never
// replaces another fate.
func WriteFate(cache string, f Fate, now time.Time) (string, error) {
	if !ValidRunID(f.Run) {
		return "", fmt.Errorf("fate: %q is not a run id", f.Run)
	}
	dir, err := existingSubdir(cache, FatesDir)
	if err != nil {
		return "", err
	}
	b, err := encodeFate(f)
	if err != nil {
		return "", err
	}
	// Two fates of one run in one millisecond (a sweep and a watchdog, two
	// sweeps) both stay: the second takes the next free millisecond.
	return writeNew(dir, func(i int) string {
		return f.Run + "-" + strconv.FormatInt(now.UnixMilli()+int64(i), 10) + ".json"
	}, b)
}

// encodeFate is f as a fate file holds it, bounded.
func encodeFate(f Fate) ([]byte, error) {
	f.Version = FateVersion
	if len(f.Items) > MaxFateItems {
		f.ItemsOmitted += len(f.Items) - MaxFateItems
		f.Items = f.Items[:MaxFateItems]
	}
	f.Owner.Command = cut(f.Owner.Command, maxFateCommand)
	f.Note = cut(f.Note, maxFateNote)
	f.Items = slices.Clone(f.Items)
	for i := range f.Items {
		f.Items[i].Note = cut(f.Items[i].Note, maxFateNote)
		f.Items[i].Origin = f.Items[i].Origin.Bounded()
	}
	if f.Items == nil {
		f.Items = []FateItem{}
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// joinLockName is the fates folder's lock, held while a fate is joined.
const joinLockName = ".join.lock"

// JoinWait bounds JoinFate's wait for the fates folder's lock.
const JoinWait = 10 * time.Second

// JoinFate writes f, a share of a run's reaping, into a fate of its run
// already written, when join merges it into one (join(old) returns the
// merged fate and true): one death, one fate, though two processes reaped
// it (a run's two watchdogs). Else it writes f as a new fate, as
// WriteFate does. The fates folder's lock makes the read, the merge and
// the write one step among joiners; a lock not had within JoinWait (its
// holder frozen) writes f as a fate of its own: two fates, never none.
func JoinFate(cache string, f Fate, now time.Time, join func(old Fate) (Fate, bool)) (string, error) {
	if !ValidRunID(f.Run) {
		return "", fmt.Errorf("fate: %q is not a run id", f.Run)
	}
	dir, err := existingSubdir(cache, FatesDir)
	if err != nil {
		return "", err
	}
	l := NewFileLock(filepath.Join(dir, joinLockName))
	ctx, cancel := context.WithTimeout(context.Background(), JoinWait)
	ok, _ := l.TryLockContext(ctx, 5*time.Millisecond)
	cancel()
	if !ok {
		return WriteFate(cache, f, now)
	}
	defer l.Unlock()
	for _, p := range runFates(dir, f.Run) {
		b, err := ReadFile(p, MaxFateSize)
		var old Fate
		if err != nil || json.Unmarshal(b, &old) != nil || old.Run != f.Run {
			continue
		}
		merged, ok := join(old)
		if !ok {
			continue
		}
		merged.Run = f.Run
		b, err = encodeFate(merged)
		if err != nil {
			return "", err
		}
		return p, writeAtomic(p, b)
	}
	return WriteFate(cache, f, now)
}

// runFates are the paths of run's fates in dir, newest first.
func runFates(dir, run string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type fate struct {
		path    string
		written time.Time
	}
	var out []fate
	for _, e := range ents {
		// Not a glob: a run id may hold a pattern's characters.
		if r, written, ok := parseFateName(e.Name()); ok && r == run && e.Type().IsRegular() {
			out = append(out, fate{filepath.Join(dir, e.Name()), written})
		}
	}
	slices.SortFunc(out, func(a, b fate) int { return b.written.Compare(a.written) })
	paths := make([]string, len(out))
	for i, f := range out {
		paths[i] = f.path
	}
	return paths
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// OwnerStubPath is where a Go owner leaves what a fate needs to know of it
// (its command line) for whoever reaps its run: the watchdog embeds it.
func OwnerStubPath(cache, run string) string {
	return filepath.Join(cache, FatesDir, "."+run+".owner")
}

// WriteOwnerStub writes o as run's owner stub.
func WriteOwnerStub(cache, run string, o FateOwner) error {
	if !ValidRunID(run) {
		return fmt.Errorf("fate: %q is not a run id", run)
	}
	if _, err := EnsureSubdir(cache, FatesDir); err != nil {
		return err
	}
	o.Command = cut(o.Command, maxFateCommand)
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return writeAtomic(OwnerStubPath(cache, run), b)
}

// ReadOwnerStub reads run's owner stub; the zero FateOwner when there is
// none or it cannot be read.
func ReadOwnerStub(cache, run string) FateOwner {
	var o FateOwner
	b, err := ReadFile(OwnerStubPath(cache, run), 8<<10)
	if err == nil {
		json.Unmarshal(b, &o)
	}
	return o
}

// A watchdog mark, <cache>/fates/.<run>.watchdog-<pid>, names a process
// that watches run (its identity, as JSON), so that a sweep leaves a dead
// run to its watchdog while that lives: one death, one fate, with its
// owner.
func watchdogMarkPrefix(run string) string { return "." + run + ".watchdog-" }

type watchdogMark struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"startTicks,omitempty"`
	StartISO   string `json:"startIso,omitempty"`
}

// WriteWatchdogMark marks the live process pid as a watchdog of run.
func WriteWatchdogMark(cache, run string, pid int) error {
	if !ValidRunID(run) {
		return fmt.Errorf("fate: %q is not a run id", run)
	}
	id, ok, err := Lookup(pid)
	if err != nil || !ok {
		return fmt.Errorf("watchdog mark of run %s: no live process %d (%v)", run, pid, err)
	}
	dir, err := EnsureSubdir(cache, FatesDir)
	if err != nil {
		return err
	}
	m := watchdogMark{PID: pid, StartTicks: id.StartTicks}
	if !id.Start.IsZero() {
		m.StartISO = FormatISO(id.Start)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, watchdogMarkPrefix(run)+strconv.Itoa(pid)), b)
}

// LiveWatchdog returns the pid of a live process marked as a watchdog of
// run, 0 when there is none (a pid taken since by another process does not
// count).
func LiveWatchdog(cache, run string) int {
	if pids := LiveWatchdogs(cache, run); len(pids) > 0 {
		return pids[0]
	}
	return 0
}

// LiveWatchdogs returns the pids of the live processes marked as
// watchdogs of run (a run with local processes may have two).
func LiveWatchdogs(cache, run string) []int {
	if !ValidRunID(run) {
		return nil
	}
	dir := FatesPath(cache)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	prefix := watchdogMarkPrefix(run)
	var out []int
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		b, err := ReadFile(filepath.Join(dir, e.Name()), 4<<10)
		var m watchdogMark
		if err != nil || json.Unmarshal(b, &m) != nil || m.PID <= 0 {
			continue
		}
		id, ok, err := Lookup(m.PID)
		if err != nil || !ok {
			continue
		}
		switch {
		case m.StartTicks != 0 && id.StartTicks != 0:
			ok = m.StartTicks == id.StartTicks
		default:
			t, err := ParseISO(m.StartISO)
			ok = err == nil && !id.Start.IsZero() && id.Start.Sub(t).Abs() < time.Second
		}
		if ok {
			out = append(out, m.PID)
		}
	}
	return out
}

// RemoveWatchdogMark deletes the mark of run's watchdog pid (the watchdog
// itself, as it ends).
func RemoveWatchdogMark(cache, run string, pid int) {
	if !ValidRunID(run) || pid <= 0 {
		return
	}
	// Through retryBusy: on Windows a reader of the mark at that moment
	// (LiveWatchdogs) makes the delete fail, and the mark would stay (a
	// mark was seen left so under Wine).
	_ = removeIfExists(filepath.Join(FatesPath(cache), watchdogMarkPrefix(run)+strconv.Itoa(pid)))
}

// RemoveWatchdogMarks deletes run's watchdog marks.
func RemoveWatchdogMarks(cache, run string) {
	if !ValidRunID(run) {
		return
	}
	dir := FatesPath(cache)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), watchdogMarkPrefix(run)) {
			_ = removeIfExists(filepath.Join(dir, e.Name()))
		}
	}
}

// FateFile is a fate as read from its file.
type FateFile struct {
	Fate
	Path string
	// Written is the time in its name.
	Written time.Time
	// Told: a process has told it (its .told mark exists).
	Told bool
	// Err is why it could not be read; Fate is then only its run.
	Err error
}

// ReadFates returns cache's fates, newest first, at most MaxFates of them
// (the rest are PruneFates's). A fate that cannot be read is returned with
// its Err.
func ReadFates(cache string) ([]FateFile, error) { return readFates(cache, time.Time{}, false) }

// ReadFatesSince is ReadFates of the fates written at since or later
// (the time in a fate's name): the others are not opened.
func ReadFatesSince(cache string, since time.Time) ([]FateFile, error) {
	return readFates(cache, since, false)
}

// ReadUntoldFates is ReadFates of the fates no process has told yet
// (ClaimTell): told ones are not opened. Every test process's first use
// asks this, and most of the folder's fates are told.
func ReadUntoldFates(cache string) ([]FateFile, error) { return readFates(cache, time.Time{}, true) }

func readFates(cache string, since time.Time, untoldOnly bool) ([]FateFile, error) {
	dir := FatesPath(cache)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	told := map[string]bool{}
	var out []FateFile
	for _, e := range ents {
		name := e.Name()
		if stem, ok := strings.CutSuffix(name, ".told"); ok {
			told[stem] = true
			continue
		}
		run, written, ok := parseFateName(name)
		if !ok || !e.Type().IsRegular() || written.Before(since) {
			continue
		}
		out = append(out, FateFile{Fate: Fate{Run: run}, Path: filepath.Join(dir, name), Written: written})
	}
	slices.SortFunc(out, func(a, b FateFile) int { return b.Written.Compare(a.Written) })
	if len(out) > MaxFates {
		out = out[:MaxFates]
	}
	for i := range out {
		out[i].Told = told[strings.TrimSuffix(filepath.Base(out[i].Path), ".json")]
	}
	if untoldOnly {
		out = slices.DeleteFunc(out, func(ff FateFile) bool { return ff.Told })
	}
	for i := range out {
		ff := &out[i]
		b, err := ReadFile(ff.Path, MaxFateSize)
		if err != nil {
			ff.Err = err
			continue
		}
		var f Fate
		if err := json.Unmarshal(b, &f); err != nil {
			ff.Err = fmt.Errorf("not a fate: %v", err)
			continue
		}
		f.Run = ff.Run // the name's, which was checked
		ff.Fate = f
	}
	return out, nil
}

// HasFate reports whether cache holds a fate of run.
func HasFate(cache, run string) bool {
	if !ValidRunID(run) {
		return false
	}
	ents, err := os.ReadDir(FatesPath(cache))
	if err != nil {
		return false
	}
	for _, e := range ents {
		// Not a glob: a run id may hold a pattern's characters.
		if r, _, ok := parseFateName(e.Name()); ok && r == run {
			return true
		}
	}
	return false
}

// parseFateName splits "<run>-<unix ms>.json".
func parseFateName(name string) (run string, written time.Time, ok bool) {
	stem, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return "", time.Time{}, false
	}
	i := strings.LastIndexByte(stem, '-')
	if i <= 0 {
		return "", time.Time{}, false
	}
	ms, err := strconv.ParseInt(stem[i+1:], 10, 64)
	if err != nil || ms <= 0 || !ValidRunID(stem[:i]) {
		return "", time.Time{}, false
	}
	return stem[:i], time.UnixMilli(ms), true
}

// ClaimTell marks the fate at path told, and reports whether this call did
// (so exactly one process tells each fate).
func ClaimTell(path string) bool {
	f, err := OpenFile(strings.TrimSuffix(path, ".json")+".told", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// PruneFates keeps the newest MaxFates fates of cache younger than
// MaxFateAge and deletes the others, with their marks; and deletes owner
// stubs, origins and watchdog marks whose run has no files left, an hour
// after they were written.
func PruneFates(cache string, now time.Time) {
	dir := FatesPath(cache)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type fate struct {
		stem    string
		written time.Time
	}
	var fates []fate
	marks := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".told"):
			marks[strings.TrimSuffix(name, ".told")] = true
		case strings.HasPrefix(name, ".") && (strings.HasSuffix(name, ".owner") || strings.HasSuffix(name, originsSuffix) || strings.Contains(name, ".watchdog-")):
			stem := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "."), ".owner"), originsSuffix)
			run, _, _ := strings.Cut(stem, ".watchdog-")
			info, err := e.Info()
			if err != nil || now.Sub(info.ModTime()) < time.Hour {
				continue
			}
			if !HasFiles(filepath.Join(cache, RunsDir), run) {
				os.Remove(filepath.Join(dir, name))
			}
		case strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-"):
			// A writer killed between its temporary file and the rename.
			if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > time.Hour {
				os.Remove(filepath.Join(dir, name))
			}
		default:
			if _, written, ok := parseFateName(name); ok {
				fates = append(fates, fate{strings.TrimSuffix(name, ".json"), written})
			}
		}
	}
	slices.SortFunc(fates, func(a, b fate) int { return b.written.Compare(a.written) })
	keep := map[string]bool{}
	for i, f := range fates {
		if i < MaxFates && now.Sub(f.written) <= MaxFateAge {
			keep[f.stem] = true
			continue
		}
		os.Remove(filepath.Join(dir, f.stem+".json"))
		os.Remove(filepath.Join(dir, f.stem+".told"))
	}
	for stem := range marks {
		if !keep[stem] {
			if _, err := os.Lstat(filepath.Join(dir, stem+".json")); errors.Is(err, os.ErrNotExist) {
				os.Remove(filepath.Join(dir, stem+".told"))
			}
		}
	}
}

// NoteAgainAfter is how long a long note (Ryuk turned off, say) stays told
// on a host before a process tells it again.
const NoteAgainAfter = 24 * time.Hour

// TellNote reports whether note is to be told now: not when a process
// using cache told it within NoteAgainAfter. A mark in the fates folder,
// named after the note's hash, says when it was last told; many test
// binaries starting at once tell it once between them.
func TellNote(cache, note string, now time.Time) bool {
	dir, err := EnsureSubdir(cache, FatesDir)
	if err != nil {
		return true
	}
	sum := sha256.Sum256([]byte(note))
	mark := filepath.Join(dir, ".note-"+hex.EncodeToString(sum[:8]))
	if fi, err := os.Lstat(mark); err == nil {
		if !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < NoteAgainAfter {
			return false
		}
		os.Remove(mark)
	}
	f, err := OpenFile(mark, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return !errors.Is(err, os.ErrExist)
	}
	f.Close()
	os.Chtimes(mark, now, now)
	return true
}
