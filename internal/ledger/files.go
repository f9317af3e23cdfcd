package ledger

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rightsize/rightsize-go/internal/names"
)

// Kind is what a ledger line names; one type with the backends' and the
// reaper's (internal/names).
type Kind = names.Kind

// The kinds, in the order a run is reaped.
const (
	SandboxKind = names.SandboxKind
	NetworkKind = names.NetworkKind
	// ProcessKind lines are rightsize-go's own: local processes a test
	// started, in runs/<id>.processes, a file the other members never read.
	ProcessKind = names.ProcessKind
	// VolumeKind and ImageKind lines are rightsize-go's own too: named
	// volumes (by name) and images (by the build's mark, or by id) that a
	// test made through the engine's API, in runs/<id>.volumes and
	// runs/<id>.images.
	VolumeKind = names.VolumeKind
	ImageKind  = names.ImageKind
)

// Kinds lists every kind, in the order a run is reaped.
var Kinds = names.Kinds

// File name suffixes of a run's files in the runs folder. The family's are
// the record (.json) and the two line files; the rest are rightsize-go's
// own, which the other members never open (they list runs by *.json) and
// never delete (they delete .json, .sandboxes and .networks):
//
//   - .gorecord: the record again, which Go reads first. A sibling that
//     reaped a dead Go run deleted the .json, and Go still judges the run
//     and ends what .processes lists; a run the siblings would misjudge
//     (the local backend's, one on an engine other than the default, one
//     owned from a pid namespace other than the host's, one on a host with
//     no ps) has this record only, so they never see it.
//   - .processes: the lines of local processes (Process kind).
//   - .volumes, .images: named volumes and built images (Volume and
//     Image kinds), removed with the run's containers and networks.
//   - .lock: a sweeper's claim on the run.
//
// One more member, @systemfsoftware/rightsize, writes the family's record
// and, instead of the two line files, EntriesExt: its sandboxes and
// networks together, one JSON object a line (entries.go). It lists runs by
// *.json too, and deletes exactly .json and .jsonl.
//
// Outside the runs folder, fates/ (ledger/fates.go, with each run's owner
// stub and its origins, origins.go), the watchdog's log
// (reaper/watchdog-<run>.log) and locks/ (SharedLockPath) are Go's own
// too.
const (
	RecordExt    = ".json"
	OwnRecordExt = ".gorecord"
	SandboxesExt = ".sandboxes"
	NetworksExt  = ".networks"
	ProcessesExt = ".processes"
	VolumesExt   = ".volumes"
	ImagesExt    = ".images"
	LockExt      = ".lock"
	EntriesExt   = ".jsonl"
)

// RecordPath is the path of run id's family record in runsDir.
func RecordPath(runsDir, id string) string { return filepath.Join(runsDir, id+RecordExt) }

// OwnRecordPath is the path of run id's record of rightsize-go's own.
func OwnRecordPath(runsDir, id string) string { return filepath.Join(runsDir, id+OwnRecordExt) }

// LinePath is the path of run id's line file of kind k in runsDir.
func LinePath(runsDir, id string, k Kind) string {
	return filepath.Join(runsDir, id+"."+k.Plural())
}

// Paths returns the paths of run id's record and of the two line files the
// whole family shares (LinePath gives any kind's).
func Paths(runsDir, id string) (record, sandboxes, networks string) {
	return RecordPath(runsDir, id), LinePath(runsDir, id, SandboxKind), LinePath(runsDir, id, NetworkKind)
}

// EntriesPath is the path of run id's entries file (EntriesExt).
func EntriesPath(runsDir, id string) string { return filepath.Join(runsDir, id+EntriesExt) }

// runPaths lists the family record's path, Go's own record's, each kind's
// line file's (by the kind's value, not its reaping order), then the
// entries file's: the order of RunFiles.has.
func runPaths(runsDir, id string) []string {
	out := make([]string, entriesFile+1)
	out[familyRecord], out[ownRecord], out[entriesFile] = RecordPath(runsDir, id), OwnRecordPath(runsDir, id), EntriesPath(runsDir, id)
	for _, k := range Kinds {
		out[firstLine+int(k)] = LinePath(runsDir, id, k)
	}
	return out
}

// HasFiles reports whether runsDir holds a record or a line file of run
// id (or something where one would be).
func HasFiles(runsDir, id string) bool {
	for _, p := range runPaths(runsDir, id) {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
}

// writeRecords writes a run's record: Go's own copy, and the family's when
// family is set. Both names are links to one file, written once: a second
// file would cost the first sandbox another creation (about as much as
// everything else the ledger does for it), a link a tenth of that.
func writeRecords(runsDir, id string, data []byte, family bool) error {
	own, fam := OwnRecordPath(runsDir, id), RecordPath(runsDir, id)
	if !family {
		return writeAtomic(own, data)
	}
	return writeAtomicTwice(own, fam, data)
}

// ErrNotRegular: a name of the cache dir is taken by something that is
// not a regular file (a FIFO, a socket, a device, a directory). It is
// never read, written or locked: a FIFO would block its opener for ever.
var ErrNotRegular = errors.New("not a regular file")

func notRegularError(path string, m fs.FileMode) error {
	return fmt.Errorf("%s is %s, %w: not opened (remove it if you did not put it there)", path, describeType(m), ErrNotRegular)
}

func symlinkError(path string) error {
	return fmt.Errorf("%s is a symbolic link: not followed", path)
}

// openNoFollow opens path for reading (OpenFile).
func openNoFollow(path string) (*os.File, error) { return OpenFile(path, os.O_RDONLY, 0) }

// appendNoFollow opens path for appending, creating it with mode 0600
// (OpenFile).
func appendNoFollow(path string) (*os.File, error) {
	return OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// ReadFile reads a file of the cache dir (opened by OpenFile), failing
// past limit bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}

// writeAtomic replaces path with data: a temporary file in the same folder
// (mode 0600), then a rename (replaceFile), so a reader sees the old content
// or the new, never a part.
func writeAtomic(path string, data []byte) error {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return err
	}
	if err := replaceFile(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeAtomicTwice is writeAtomic of the same data to first, then second,
// as two links to one file where the file system has links.
func writeAtomicTwice(first, second string, data []byte) error {
	tmp, err := writeTemp(first, data)
	if err != nil {
		return err
	}
	if err := os.Link(tmp, first); err != nil {
		// first exists (a writer killed before it was deleted), or the
		// file system has no links: a file each.
		os.Remove(tmp)
		if err := writeAtomic(first, data); err != nil {
			return err
		}
		return writeAtomic(second, data)
	}
	if err := replaceFile(tmp, second); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", second, err)
	}
	return nil
}

// writeTemp writes data to a new temporary file beside path, named so that
// no reader takes it for a run's file, and returns its path.
func writeTemp(path string, data []byte) (string, error) {
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return tmp, nil
}

// writeNew writes data, atomically, under the first name of name(0),
// name(1), … that no file has yet in dir, and returns its path: a
// temporary file, then a hard link, which never replaces a file. Where the
// file system has no hard links, a rename to a free name does.
func writeNew(dir string, name func(i int) string, data []byte) (string, error) {
	tmp, err := writeTemp(filepath.Join(dir, name(0)), data)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	for i := 0; i < 1000; i++ {
		p := filepath.Join(dir, name(i))
		err := os.Link(tmp, p)
		if err == nil {
			return p, nil
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if _, lerr := os.Lstat(p); errors.Is(lerr, fs.ErrNotExist) && os.Rename(tmp, p) == nil {
			return p, nil
		}
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return "", fmt.Errorf("write %s: a thousand files of that name already", filepath.Join(dir, name(0)))
}

// WriteLines replaces a line file with names, one per line, atomically; no
// names removes the file. Every name must be valid.
func WriteLines(path string, names []string) error {
	if len(names) == 0 {
		return removeIfExists(path)
	}
	var b strings.Builder
	for _, n := range names {
		if !ValidName(n) {
			return fmt.Errorf("write %s: %q is not a valid name", path, n)
		}
		b.WriteString(n)
		b.WriteByte('\n')
	}
	return writeAtomic(path, []byte(b.String()))
}

// RemoveRunFiles deletes a run's files: the line files (the entries file
// too) first, then the records (the family's, then Go's own), so an
// interruption never leaves lines without their record. The run's lock
// file, if any, is left to whoever holds it.
func RemoveRunFiles(runsDir, id string) error {
	if err := removeIfExists(EntriesPath(runsDir, id)); err != nil {
		return err
	}
	return RemoveKindFiles(runsDir, id, Kinds[:]...)
}

func removeIfExists(path string) error {
	if err := retryBusy(func() error { return os.Remove(path) }); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// RemoveKindFiles deletes the run's line files of kinds, then its record
// when no line file of any kind is left: two reapers that share a run (the
// watchdog of its sandboxes, the watchdog of its local processes) each
// delete their own, and whichever ends last deletes the record.
func RemoveKindFiles(runsDir, id string, kinds ...Kind) error {
	var errs []error
	for _, k := range kinds {
		errs = append(errs, removeIfExists(LinePath(runsDir, id, k)))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, p := range runPaths(runsDir, id)[firstLine:] {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	return removeRecords(runsDir, id)
}

// removeRecords deletes both of a run's records, the family's first.
func removeRecords(runsDir, id string) error {
	if err := removeIfExists(RecordPath(runsDir, id)); err != nil {
		return err
	}
	return removeIfExists(OwnRecordPath(runsDir, id))
}
