package ledger

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// ErrNoRecord means a run has line files but no record.
var ErrNoRecord = errors.New("no record file")

// RunFiles is one run found in the runs folder, whoever wrote it.
type RunFiles struct {
	ID string
	// Dir is the runs folder.
	Dir string
	// Record is valid only when RecordErr is nil.
	Record Record
	// RecordErr says why the record could not be used: ErrNoRecord when the
	// run has line files but no record, else a parse or read error.
	RecordErr error
	// ModTime is the modification time of the record read, or the newest
	// line file's when there is no record.
	ModTime time.Time
	// has tells which of the run's files the folder listed, in runPaths'
	// order: the family record, Go's own, one line file per Kind, then the
	// entries file.
	has [entriesFile + 1]bool
	// Problems are files of the run that were not read (a symbolic link, a
	// directory where a file should be): reported, never followed.
	Problems []string
	// Unknown are the run's files that no reader here understands (a
	// member's file of a kind that came after this version): the run's
	// record is never deleted while one is there, so that its writer can
	// still judge the run.
	Unknown []string
}

// Indexes of RunFiles.has, and of runExts.
const (
	familyRecord = iota
	ownRecord
	firstLine
	entriesFile = firstLine + len(Kinds)
)

// Has reports whether the folder listed the line file of kind k.
func (rf RunFiles) Has(k Kind) bool { return rf.has[firstLine+int(k)] }

// HasRecord reports whether the folder listed a record of the run, the
// family's or Go's own.
func (rf RunFiles) HasRecord() bool { return rf.has[familyRecord] || rf.has[ownRecord] }

// HasFamilyRecord reports whether the folder listed the run's family
// record (RecordExt), where every member looks for runs.
func (rf RunFiles) HasFamilyRecord() bool { return rf.has[familyRecord] }

// HasEntries reports whether the folder listed the run's entries file
// (EntriesExt).
func (rf RunFiles) HasEntries() bool { return rf.has[entriesFile] }

// HasLines reports whether the folder listed any line file of the run, its
// entries file included.
func (rf RunFiles) HasLines() bool {
	for _, k := range Kinds {
		if rf.Has(k) {
			return true
		}
	}
	return rf.HasEntries()
}

// RemoveFiles deletes the run's files that the folder listed: the line
// files first, then the records. (A dead run writes no new file; deleting
// only what is known is what keeps a sweep of many runs fast.) A line file
// that is there now but was not listed keeps the records: ErrLinesSince.
func (rf RunFiles) RemoveFiles() error {
	var errs []error
	for _, k := range Kinds {
		if rf.Has(k) {
			errs = append(errs, removeIfExists(LinePath(rf.Dir, rf.ID, k)))
		}
	}
	if rf.HasEntries() {
		errs = append(errs, removeIfExists(EntriesPath(rf.Dir, rf.ID)))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The run may have been alive at the listing and dead when judged: a
	// line written in between keeps the record, never lines without one.
	for _, p := range runPaths(rf.Dir, rf.ID)[firstLine:] {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", filepath.Base(p), ErrLinesSince)
		}
	}
	if rf.has[familyRecord] {
		if err := removeIfExists(RecordPath(rf.Dir, rf.ID)); err != nil {
			return err
		}
	}
	if rf.has[ownRecord] {
		return removeIfExists(OwnRecordPath(rf.Dir, rf.ID))
	}
	return nil
}

// ErrLinesSince: a run's owner wrote a line file after the folder was
// listed (alive then, dead when judged), so its records stay with the
// lines for the next sweep, which reads them.
var ErrLinesSince = errors.New("a line file was written since the folder was listed: the run's record stays for the next sweep")

// Lists is what a run's line files hold.
type Lists struct {
	Sandboxes []string
	Networks  []string
	// Processes are the lines of local processes; Volumes and Images those
	// of named volumes and built images (rightsize-go only).
	Processes []string
	Volumes   []string
	Images    []string
	// Rejected lines are not valid names: never acted on. Only the first
	// few of each file are kept; RejectedCount counts them all.
	Rejected      []Rejected
	RejectedCount int
	// Problems are line files that could not be read (oversized ones
	// included); their names are unknown, so the run must not be forgotten.
	Problems []string
	// Oversized: a line file was past MaxLineFileSize or MaxLines.
	Oversized bool
	// Foreign counts the lines of the entries file of a kind not known
	// here (EntryFile.Foreign): they, and the run's record, are kept.
	Foreign int
	// plain and entry are the names of each kind as the plain line files
	// and the entries file list them; the fields above hold both.
	plain, entry [len(Kinds)][]string
}

// Plain returns the names of kind k that the run's line file of that kind
// lists.
func (l Lists) Plain(k Kind) []string { return l.plain[k] }

// Entry returns the names of kind k that the run's entries file lists.
func (l Lists) Entry(k Kind) []string { return l.entry[k] }

// Of returns the names of kind k.
func (l Lists) Of(k Kind) []string {
	switch k {
	case NetworkKind:
		return l.Networks
	case ProcessKind:
		return l.Processes
	case VolumeKind:
		return l.Volumes
	case ImageKind:
		return l.Images
	default:
		return l.Sandboxes
	}
}

// Len is how many names the lists hold.
func (l Lists) Len() int {
	return len(l.Sandboxes) + len(l.Networks) + len(l.Processes) + len(l.Volumes) + len(l.Images)
}

// Scan is one reading of the runs folder: the names of its files, sorted,
// and nothing else. Runs are read one at a time from it (Each), so that
// walking a folder of 200,000 runs costs the memory of their names, not
// of their records.
type Scan struct {
	// Dir is the runs folder.
	Dir   string
	files []string // sorted by run id, then extension
	// inos are the inode numbers of files, one for one; nil where the
	// platform's listing gives none.
	inos  []uint64
	other []string // everything else: temporary files, locks, strangers
}

// ScanRuns lists cache/runs. A missing folder is an empty Scan; a folder
// that is not this user's alone is an *UnsafeDirError and is not read.
func ScanRuns(cache string) (*Scan, error) {
	dir := filepath.Join(cache, RunsDir)
	s := &Scan{Dir: dir}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err := CheckPrivate(cache); err != nil {
		return nil, err
	}
	if err := CheckPrivate(dir); err != nil {
		return nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	all, inos, err := readDirNames(f)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	// Filtered in place: the listing of 200,000 runs is held once.
	s.files, s.inos = all[:0], inos[:0:len(inos)]
	for i, name := range all {
		if _, _, ok := runFile(name); ok {
			s.files = append(s.files, name)
			if inos != nil {
				s.inos = append(s.inos, inos[i])
			}
		} else {
			s.other = append(s.other, name)
		}
	}
	if inos == nil {
		s.inos = nil
	}
	sort.Sort(byRunFile{s})
	slices.Sort(s.other)
	return s, nil
}

// byRunFile sorts a Scan's files by run id, then extension, their inode
// numbers along with them.
type byRunFile struct{ s *Scan }

func (b byRunFile) Len() int { return len(b.s.files) }

func (b byRunFile) Less(i, j int) bool {
	ia, ea, _ := runFile(b.s.files[i])
	ib, eb, _ := runFile(b.s.files[j])
	if ia != ib {
		return ia < ib
	}
	return ea < eb
}

func (b byRunFile) Swap(i, j int) {
	b.s.files[i], b.s.files[j] = b.s.files[j], b.s.files[i]
	if b.s.inos != nil {
		b.s.inos[i], b.s.inos[j] = b.s.inos[j], b.s.inos[i]
	}
}

// runExts are the extensions of a run's files, at the index runFile gives.
var runExts = func() []string {
	out := make([]string, entriesFile+1)
	out[familyRecord], out[ownRecord], out[entriesFile] = RecordExt, OwnRecordExt, EntriesExt
	for _, k := range Kinds {
		out[firstLine+int(k)] = "." + k.Plural()
	}
	return out
}()

// runFile splits a run file's name into its run id and the index of its
// extension (an index of RunFiles.has).
func runFile(name string) (id string, ext int, ok bool) {
	if strings.HasPrefix(name, ".") {
		return "", 0, false
	}
	e := filepath.Ext(name)
	id = name[:len(name)-len(e)]
	if id == "" {
		return "", 0, false
	}
	for i, x := range runExts {
		if e == x {
			return id, i, true
		}
	}
	return "", 0, false
}

// Each calls fn for every run, in run id order, its record read just
// before the call; it stops at fn's first error and returns it.
func (s *Scan) Each(fn func(RunFiles) error) error {
	for i := 0; i < len(s.files); {
		rf, next := s.runAt(i)
		i = next
		rf.load()
		if err := fn(rf); err != nil {
			return err
		}
	}
	return nil
}

// EachOnDisk is Each in the order the runs' files were laid down on disk
// (by the inode number of the record, or of the first line file when there
// is none) instead of run id order, where the platform's listing tells it;
// elsewhere it is Each. Run ids are random: in their order, reading and
// deleting 200,000 files touches the file system's blocks of inodes and
// of free-space bitmaps at random, each many times over; in this order,
// about once each.
func (s *Scan) EachOnDisk(fn func(RunFiles) error) error {
	if s.inos == nil || len(s.files) > math.MaxInt32 {
		return s.Each(fn)
	}
	// Each run's first file is its family record when it has one (the
	// record's extension sorts first), else Go's own, else its first line
	// file.
	var firsts []int32
	for i := 0; i < len(s.files); {
		firsts = append(firsts, int32(i))
		_, i = s.runAt(i)
	}
	// Equal numbers (a file system that gives none) keep run id order.
	slices.SortFunc(firsts, func(a, b int32) int { return cmp.Or(cmp.Compare(s.inos[a], s.inos[b]), cmp.Compare(a, b)) })
	for _, first := range firsts {
		rf, _ := s.runAt(int(first))
		rf.load()
		if err := fn(rf); err != nil {
			return err
		}
	}
	return nil
}

// runAt returns the run whose first file is files[i], its record not yet
// read, and the index of the next run's first file.
func (s *Scan) runAt(i int) (RunFiles, int) {
	id, _, _ := runFile(s.files[i])
	rf := RunFiles{ID: id, Dir: s.Dir, RecordErr: ErrNoRecord}
	for ; i < len(s.files); i++ {
		fid, ext, _ := runFile(s.files[i])
		if fid != id {
			break
		}
		rf.has[ext] = true
	}
	rf.Unknown = unknownOf(id, s.other)
	return rf, i
}

// unknownOf returns, of others (sorted), the files of run id that no
// reader here understands: id and an extension that is not a run file's,
// a lock's or a temporary file's.
func unknownOf(id string, others []string) []string {
	var out []string
	j, _ := slices.BinarySearch(others, id+".")
	for ; j < len(others) && strings.HasPrefix(others[j], id+"."); j++ {
		if name := others[j]; strings.TrimSuffix(name, filepath.Ext(name)) == id && unknownFile(name) {
			out = append(out, name)
		}
	}
	return out
}

// unknownFile reports whether a file of the runs folder that is not a run
// file is one that no reader here understands.
func unknownFile(name string) bool {
	return !strings.HasPrefix(name, ".") && filepath.Ext(name) != LockExt && !isTemp(name)
}

// load reads the record, or the line files' times when there is none. Go's
// own record is read first: a member that reaped a dead Go run deleted the
// family's; the family's is read when Go's cannot be (written by another
// member, or by rightsize-go before it wrote its own), and before Go's copy
// of another member's record (Remember), which it may have rewritten since.
func (rf *RunFiles) load() {
	var copied *Record
	var copiedAt time.Time
	for _, i := range []int{ownRecord, familyRecord} {
		if !rf.has[i] {
			continue
		}
		path := runPathOf(rf.Dir, rf.ID, i)
		rec, mt, err := readRecord(path)
		if err == nil && i == ownRecord && rec.Writer != "go" && rf.has[familyRecord] {
			copied, copiedAt = &rec, mt
			continue
		}
		if err == nil {
			rf.Record, rf.ModTime, rf.RecordErr = rec, mt, nil
			return
		}
		if _, lerr := os.Lstat(path); errors.Is(lerr, fs.ErrNotExist) {
			// Deleted since the scan (reaped by a sibling): as if absent.
			rf.has[i] = false
			continue
		} else if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			rf.Problems = append(rf.Problems, fmt.Sprintf("%s is not a regular file (%s): not read", filepath.Base(path), describeType(fi.Mode())))
		}
		if rf.RecordErr == nil || errors.Is(rf.RecordErr, ErrNoRecord) {
			rf.ModTime, rf.RecordErr = mt, err
		}
	}
	if copied != nil {
		rf.Record, rf.ModTime, rf.RecordErr = *copied, copiedAt, nil
		return
	}
	if rf.HasRecord() {
		return
	}
	rf.RecordErr = ErrNoRecord
	for _, p := range runPaths(rf.Dir, rf.ID)[firstLine:] {
		if fi, err := os.Lstat(p); err == nil && fi.ModTime().After(rf.ModTime) {
			rf.ModTime = fi.ModTime()
		}
	}
}

// Remember keeps, as the run's record of Go's own (OwnRecordExt), a copy
// of the record another member wrote: a member may delete its record and
// leave the run's lines (the systemf member's sweep deletes only .json and
// .jsonl of the runs it reaps; the Node member prunes its record while it
// lives and never writes it again), and with the copy Go still judges
// such a run by every rule it has. A link where the file system has them;
// nothing is written when the run has Go's own record already.
func (rf RunFiles) Remember() error {
	if rf.has[ownRecord] || !rf.has[familyRecord] || rf.RecordErr != nil || rf.Record.Writer == "go" {
		return nil
	}
	fam, own := RecordPath(rf.Dir, rf.ID), OwnRecordPath(rf.Dir, rf.ID)
	err := os.Link(fam, own)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return nil
	}
	data, _, err := readRecordFile(fam)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // reaped since it was read
	}
	if err != nil {
		return err
	}
	return writeAtomic(own, data)
}

// runPathOf is the path of run id's file at index i of RunFiles.has.
func runPathOf(runsDir, id string, i int) string {
	return filepath.Join(runsDir, id+runExts[i])
}

// Temps returns the temporary files in the folder that any member of the
// family may leave when killed between writing one and renaming it:
// Go's ".<id>.json.tmp-*", Node's ".<id>.json.tmp-<pid>-<ms>", Rust's
// "<id>.json.tmp", Kotlin's "<id>.json<random>.tmp", and the same for the
// line files. No reader ever opens them.
func (s *Scan) Temps() []string {
	var out []string
	for _, name := range s.other {
		if isTemp(name) {
			out = append(out, name)
		}
	}
	return out
}

func isTemp(name string) bool {
	base := strings.TrimPrefix(name, ".")
	known := false
	for _, ext := range runExts {
		if strings.Contains(base, ext) {
			known = true
		}
	}
	return known && (strings.HasSuffix(base, ".tmp") || strings.Contains(base, ".tmp-") || strings.Contains(base, ".tmp."))
}

// Locks returns the ids of the lock files in the folder.
func (s *Scan) Locks() []string {
	var out []string
	for _, name := range s.other {
		if id, ok := strings.CutSuffix(name, LockExt); ok && ValidRunID(id) {
			out = append(out, id)
		}
	}
	return out
}

// HasRun reports whether the scan saw a file of run id.
func (s *Scan) HasRun(id string) bool {
	i, _ := slices.BinarySearchFunc(s.files, id, func(name, id string) int {
		fid, _, _ := runFile(name)
		return strings.Compare(fid, id)
	})
	if i >= len(s.files) {
		return false
	}
	fid, _, _ := runFile(s.files[i])
	return fid == id
}

// ReadRun reads one run's files, as ScanRuns and Each would. A run with no
// file at all is an error wrapping fs.ErrNotExist.
func ReadRun(cache, id string) (RunFiles, error) {
	if !ValidRunID(id) {
		return RunFiles{}, fmt.Errorf("ledger: %q cannot name a run's files", id)
	}
	dir := filepath.Join(cache, RunsDir)
	if err := CheckPrivate(cache); err != nil {
		return RunFiles{}, err
	}
	if err := CheckPrivate(dir); err != nil {
		return RunFiles{}, err
	}
	rf := RunFiles{ID: id, Dir: dir, RecordErr: ErrNoRecord}
	found := false
	for i, p := range runPaths(dir, id) {
		if _, err := os.Lstat(p); err == nil {
			rf.has[i], found = true, true
		}
	}
	rf.Unknown = unknownIn(dir, id)
	if !found && len(rf.Unknown) == 0 {
		return RunFiles{}, fmt.Errorf("ledger: run %s: %w", id, fs.ErrNotExist)
	}
	rf.load()
	return rf, nil
}

// unknownIn is unknownOf for run id in the runs folder dir, read now.
func unknownIn(dir, id string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	var others []string
	for {
		batch, err := f.Readdirnames(1024)
		for _, name := range batch {
			if _, _, known := runFile(name); !known && strings.HasPrefix(name, id+".") {
				others = append(others, name)
			}
		}
		if err != nil {
			break
		}
	}
	slices.Sort(others)
	return unknownOf(id, others)
}

func readRecord(path string) (Record, time.Time, error) {
	data, mt, err := readRecordFile(path)
	if err != nil {
		return Record{}, mt, err
	}
	rec, err := ParseRecord(data)
	return rec, mt, err
}

// readRecordFile reads a record's bytes and its modification time (known
// when the file could be looked at, even if it was not read). A symbolic
// link is not followed; anything but a regular file, and one past
// MaxRecordSize, is not read.
func readRecordFile(path string) ([]byte, time.Time, error) {
	if data, mt, ok, err := readRecordFast(path); ok {
		return data, mt, err
	}
	return readRecordSlow(path)
}

// readRecordSlow is readRecordFile through an *os.File, on every platform.
func readRecordSlow(path string) ([]byte, time.Time, error) {
	f, err := openNoFollow(path)
	if err != nil {
		var mt time.Time
		if fi, lerr := os.Lstat(path); lerr == nil {
			mt = fi.ModTime()
		}
		return nil, mt, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	if fi.Size() > MaxRecordSize {
		return nil, fi.ModTime(), recordTooBig(fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRecordSize+1))
	if err != nil {
		return nil, fi.ModTime(), err
	}
	return data, fi.ModTime(), nil
}

func recordTooBig(size int64) error {
	return fmt.Errorf("record is %d bytes, more than the %d a record can be: not read", size, MaxRecordSize)
}

// ReadLists reads the run's line files now. Line files that cannot be read
// (a symbolic link, an oversized one) are reported in Problems.
func (rf RunFiles) ReadLists() Lists {
	var l Lists
	for _, k := range Kinds {
		p := LinePath(rf.Dir, rf.ID, k)
		lf, err := ReadLines(p)
		if err != nil {
			l.Problems = append(l.Problems, err.Error())
			if errors.Is(err, ErrOversized) {
				l.Oversized = true
			}
			continue
		}
		l.plain[k] = lf.Names
		l.Rejected = append(l.Rejected, lf.Rejected...)
		l.RejectedCount += lf.RejectedCount
	}
	if ef, err := ReadEntries(EntriesPath(rf.Dir, rf.ID)); err != nil {
		l.Problems = append(l.Problems, err.Error())
		l.Oversized = l.Oversized || errors.Is(err, ErrOversized)
	} else {
		l.entry[SandboxKind], l.entry[NetworkKind] = ef.Sandboxes, ef.Networks
		l.Rejected = append(l.Rejected, ef.Rejected...)
		l.RejectedCount += ef.RejectedCount
		l.Foreign = ef.Foreign
	}
	l.Sandboxes = union(l.plain[SandboxKind], l.entry[SandboxKind])
	l.Networks = union(l.plain[NetworkKind], l.entry[NetworkKind])
	l.Processes = l.plain[ProcessKind]
	l.Volumes, l.Images = l.plain[VolumeKind], l.plain[ImageKind]
	return l
}

// union is a, then what of b is not in a.
func union(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(a, n) {
			out = append(out, n)
		}
	}
	return out
}

// Age is how old the run's record (or line files) is, at now.
func (rf RunFiles) Age(now time.Time) time.Duration {
	if rf.ModTime.IsZero() {
		return 0
	}
	return now.Sub(rf.ModTime)
}

// EachAhead is Each (or EachOnDisk when onDisk) with the records read and
// parsed by a goroutine of its own, a few batches ahead of fn: reading
// waits on the disk while fn judges, deletes or prints on the other core.
// A record read ahead is at most about a thousand runs older than fn's
// turn with it (four batches). Memory is bounded by the batches, not the number of runs; the
// reader has stopped when EachAhead returns.
func (s *Scan) EachAhead(onDisk bool, fn func(RunFiles) error) error {
	const batch = 256
	each := s.Each
	if onDisk {
		each = s.EachOnDisk
	}
	batches := make(chan []RunFiles, 2)
	free := make(chan []RunFiles, 3)
	stop := make(chan struct{})
	var readErr error
	go func() {
		defer close(batches)
		send := func(b []RunFiles) bool {
			select {
			case batches <- b:
				return true
			case <-stop:
				return false
			}
		}
		b := make([]RunFiles, 0, batch)
		readErr = each(func(rf RunFiles) error {
			if b = append(b, rf); len(b) < batch {
				return nil
			}
			if !send(b) {
				return errReadStopped
			}
			select {
			case b = <-free:
			default:
				b = make([]RunFiles, 0, batch)
			}
			return nil
		})
		if readErr == nil && len(b) > 0 {
			send(b)
		}
	}()
	for b := range batches {
		for i, rf := range b {
			if err := fn(rf); err != nil {
				close(stop)
				for range batches {
				}
				return err
			}
			b[i] = RunFiles{} // nothing of a run outlives its turn
		}
		select {
		case free <- b[:0]:
		default:
		}
	}
	return readErr
}

// errReadStopped ends the reading ahead when fn has stopped.
var errReadStopped = errors.New("stopped")
