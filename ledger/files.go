package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// File name suffixes of a run's files in the runs folder.
const (
	RecordExt    = ".json"
	SandboxesExt = ".sandboxes"
	NetworksExt  = ".networks"
	LockExt      = ".lock"
)

// Paths returns the record and line file paths of run id in runsDir.
func Paths(runsDir, id string) (record, sandboxes, networks string) {
	base := filepath.Join(runsDir, id)
	return base + RecordExt, base + SandboxesExt, base + NetworksExt
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
// run's lock file, if any, is left to whoever holds it; its leftover
// temporary files are RunFiles.Temps.
func RemoveRunFiles(runsDir, id string) error {
	rec, sbx, nets := Paths(runsDir, id)
	if err := errors.Join(removeIfExists(sbx), removeIfExists(nets)); err != nil {
		return err
	}
	return removeIfExists(rec)
}

// tempOf returns the run id a hidden temporary file belongs to: writeAtomic
// names them ".<id><ext>.tmp-<random>", the watchdog ".<id><ext>.tmp.<pid>".
// A writer killed between creating one and renaming it leaves it behind,
// and no reader looks at hidden files, so the run's reaper deletes them.
func tempOf(name string) (id string, ok bool) {
	if !strings.HasPrefix(name, ".") {
		return "", false
	}
	for _, ext := range []string{RecordExt, SandboxesExt, NetworksExt} {
		for _, mark := range []string{ext + ".tmp-", ext + ".tmp."} {
			if i := strings.LastIndex(name, mark); i > 1 {
				return name[1:i], true
			}
		}
	}
	return "", false
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
