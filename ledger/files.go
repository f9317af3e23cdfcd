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
)

// Kinds lists every kind, sandboxes first.
var Kinds = names.Kinds

// File name suffixes of a run's files in the runs folder.
const (
	RecordExt    = ".json"
	SandboxesExt = ".sandboxes"
	NetworksExt  = ".networks"
	ProcessesExt = ".processes"
	LockExt      = ".lock"
)

// RecordPath is the path of run id's record in runsDir.
func RecordPath(runsDir, id string) string { return filepath.Join(runsDir, id+RecordExt) }

// LinePath is the path of run id's line file of kind k in runsDir.
func LinePath(runsDir, id string, k Kind) string {
	return filepath.Join(runsDir, id+"."+k.Plural())
}

// Paths returns the paths of run id's record and of the two line files the
// whole family shares (LinePath gives any kind's).
func Paths(runsDir, id string) (record, sandboxes, networks string) {
	return RecordPath(runsDir, id), LinePath(runsDir, id, SandboxKind), LinePath(runsDir, id, NetworkKind)
}

// runPaths lists the record's path, then each kind's line file's.
func runPaths(runsDir, id string) []string {
	out := []string{RecordPath(runsDir, id)}
	for _, k := range Kinds {
		out = append(out, LinePath(runsDir, id, k))
	}
	return out
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
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := replaceFile(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeNew writes data, atomically, under the first name of name(0),
// name(1), … that no file has yet in dir, and returns its path: a
// temporary file, then a hard link, which never replaces a file. Where the
// file system has no hard links, a rename to a free name does.
func writeNew(dir string, name func(i int) string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, "."+name(0)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", filepath.Join(dir, name(0)), err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		return "", fmt.Errorf("write %s: %w", filepath.Join(dir, name(0)), err)
	}
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

// RemoveRunFiles deletes a run's files: the line files first, then the
// record, so an interruption never leaves lines without their record. The
// run's lock file, if any, is left to whoever holds it.
func RemoveRunFiles(runsDir, id string) error {
	return RemoveKindFiles(runsDir, id, Kinds[:]...)
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
	for _, k := range Kinds {
		if _, err := os.Lstat(LinePath(runsDir, id, k)); !errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	return removeIfExists(RecordPath(runsDir, id))
}
