package ledger

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

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
	// ModTime is the record file's modification time, or the newest line
	// file's when there is no record: the age of an unparseable run.
	ModTime time.Time
	// HasSandboxes and HasNetworks tell which line files exist.
	HasSandboxes, HasNetworks bool
	// Problems are files of the run that were not read (a symbolic link, a
	// directory where a file should be): reported, never followed.
	Problems []string
	// Temps are hidden temporary files a writer of the run was killed
	// before renaming: never read, deleted with the run (RemoveFiles).
	Temps []string
}

// RemoveFiles deletes the run's files (RemoveRunFiles), then its leftover
// temporary files, best effort.
func (rf RunFiles) RemoveFiles() error {
	if err := RemoveRunFiles(rf.Dir, rf.ID); err != nil {
		return err
	}
	for _, t := range rf.Temps {
		os.Remove(filepath.Join(rf.Dir, t))
	}
	return nil
}

// Lists is what a run's line files hold.
type Lists struct {
	Sandboxes []string
	Networks  []string
	// Rejected lines are not valid names: never acted on.
	Rejected []Rejected
	// Problems are line files that could not be read; their names are
	// unknown, so the run must not be forgotten.
	Problems []string
}

// ListRuns reads every run in cache/runs: one entry per file stem, sorted by
// id, records parsed, line files not yet read. A missing runs folder is no
// runs. Hidden temporary files are never read; they are listed in Temps.
func ListRuns(cache string) ([]RunFiles, error) {
	dir := filepath.Join(cache, RunsDir)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("ledger: %s is not a directory (%s): not read", dir, fi.Mode().Type())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	byID := map[string]*RunFiles{}
	get := func(id string) *RunFiles {
		rf := byID[id]
		if rf == nil {
			rf = &RunFiles{ID: id, Dir: dir, RecordErr: ErrNoRecord}
			byID[id] = rf
		}
		return rf
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			if id, ok := tempOf(name); ok && e.Type().IsRegular() {
				rf := get(id)
				rf.Temps = append(rf.Temps, name)
				if info, err := e.Info(); err == nil && errors.Is(rf.RecordErr, ErrNoRecord) && info.ModTime().After(rf.ModTime) {
					rf.ModTime = info.ModTime()
				}
			}
			continue
		}
		ext := filepath.Ext(name)
		id := strings.TrimSuffix(name, ext)
		if id == "" {
			continue
		}
		switch ext {
		case RecordExt, SandboxesExt, NetworksExt:
		default:
			continue
		}
		rf := get(id)
		if !e.Type().IsRegular() {
			rf.Problems = append(rf.Problems, fmt.Sprintf("%s is not a regular file (%s): not read", name, e.Type()))
			if info, err := e.Info(); err == nil && info.ModTime().After(rf.ModTime) {
				rf.ModTime = info.ModTime()
			}
			if ext == RecordExt {
				rf.RecordErr = fmt.Errorf("%s is not a regular file (%s): not read", name, e.Type())
			}
			continue
		}
		switch ext {
		case RecordExt:
			rf.Record, rf.ModTime, rf.RecordErr = readRecord(filepath.Join(dir, name))
		case SandboxesExt, NetworksExt:
			if ext == SandboxesExt {
				rf.HasSandboxes = true
			} else {
				rf.HasNetworks = true
			}
			if errors.Is(rf.RecordErr, ErrNoRecord) {
				if info, err := e.Info(); err == nil && info.ModTime().After(rf.ModTime) {
					rf.ModTime = info.ModTime()
				}
			}
		}
	}
	out := make([]RunFiles, 0, len(byID))
	for _, rf := range byID {
		out = append(out, *rf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ReadRun reads one run's files, as ListRuns would.
func ReadRun(cache, id string) (RunFiles, error) {
	runs, err := ListRuns(cache)
	if err != nil {
		return RunFiles{}, err
	}
	for _, rf := range runs {
		if rf.ID == id {
			return rf, nil
		}
	}
	return RunFiles{}, fmt.Errorf("ledger: run %s: %w", id, fs.ErrNotExist)
}

func readRecord(path string) (Record, time.Time, error) {
	f, err := openNoFollow(path)
	if err != nil {
		var mt time.Time
		if fi, lerr := os.Lstat(path); lerr == nil {
			mt = fi.ModTime()
		}
		return Record{}, mt, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Record{}, time.Time{}, err
	}
	if !fi.Mode().IsRegular() {
		return Record{}, fi.ModTime(), fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > MaxRecordSize {
		return Record{}, fi.ModTime(), fmt.Errorf("record is %d bytes, more than the %d a record can be: not read", fi.Size(), MaxRecordSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRecordSize+1))
	if err != nil {
		return Record{}, fi.ModTime(), err
	}
	rec, err := ParseRecord(data)
	return rec, fi.ModTime(), err
}

// ReadLists reads the run's line files now. Line files that cannot be read
// (a symbolic link, say) are reported in Problems.
func (rf RunFiles) ReadLists() Lists {
	_, sbx, nets := Paths(rf.Dir, rf.ID)
	var l Lists
	var rej []Rejected
	var err error
	l.Sandboxes, rej, err = ReadLines(sbx)
	l.Rejected = append(l.Rejected, rej...)
	if err != nil {
		l.Problems = append(l.Problems, err.Error())
	}
	l.Networks, rej, err = ReadLines(nets)
	l.Rejected = append(l.Rejected, rej...)
	if err != nil {
		l.Problems = append(l.Problems, err.Error())
	}
	return l
}

// Age is how old the run's record (or line files) is, at now.
func (rf RunFiles) Age(now time.Time) time.Duration {
	if rf.ModTime.IsZero() {
		return 0
	}
	return now.Sub(rf.ModTime)
}
