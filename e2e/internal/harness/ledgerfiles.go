//go:build linux

package harness

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// RunsDir is cache/runs.
func RunsDir(cache string) string { return filepath.Join(cache, ledger.RunsDir) }

// RunFiles lists which of run id's records and line files exist in cache
// (a symbolic link counts, whatever it points at).
func RunFiles(cache, id string) []string {
	rec, sbx, nets := ledger.Paths(RunsDir(cache), id)
	var out []string
	for _, p := range []string{rec, ledger.OwnRecordPath(RunsDir(cache), id), sbx, nets, ledger.LinePath(RunsDir(cache), id, ledger.ProcessKind)} {
		if _, err := os.Lstat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
			out = append(out, filepath.Base(p))
		}
	}
	return out
}

// ListedNames reads a line file the simple way (split on newlines, trim,
// skip blank lines), independently of the ledger package. As the contract
// has it, a line ends in its newline: a last piece without one is an
// append not finished, and not listed. A missing file lists nothing.
func ListedNames(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[:len(lines)-1] {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// WriteRun writes a run's files as they are given: record (the bytes of the
// record file; nil writes none), and the line files (none when nil). It
// creates cache/runs when missing.
func WriteRun(cache, id string, record []byte, sandboxes, networks []string) error {
	dir := RunsDir(cache)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	rec, sbx, nets := ledger.Paths(dir, id)
	if record != nil {
		if err := os.WriteFile(rec, record, 0o600); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		path  string
		names []string
	}{{sbx, sandboxes}, {nets, networks}} {
		if f.names == nil {
			continue
		}
		if err := os.WriteFile(f.path, []byte(strings.Join(f.names, "\n")+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}
