package ledger

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestEnsureSubdir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits are not Windows' access control")
	}
	cache := filepath.Join(t.TempDir(), "a", "b", "rightsize")
	p, err := EnsureSubdir(cache, RunsDir)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(cache, RunsDir) {
		t.Errorf("EnsureSubdir = %q, want %q", p, filepath.Join(cache, RunsDir))
	}
	for _, d := range []string{filepath.Join(cache, ".."), cache, p} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want a 0700 directory: the ledger names what a user runs", d, fi.Mode())
		}
	}
	// Again: an existing folder is fine.
	if _, err := EnsureSubdir(cache, RunsDir); err != nil {
		t.Errorf("EnsureSubdir on an existing folder: %v", err)
	}
	// A symbolic link in place of the sub-folder is refused.
	if err := os.Symlink(t.TempDir(), filepath.Join(cache, ReaperDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureSubdir(cache, ReaperDir); err == nil {
		t.Error("EnsureSubdir accepted a symbolic link as the sub-folder: what it writes could land outside the cache dir")
	}
	// A file in place of the sub-folder is refused.
	if err := os.WriteFile(filepath.Join(cache, ReuseDir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureSubdir(cache, ReuseDir); err == nil {
		t.Error("EnsureSubdir accepted a regular file as the sub-folder")
	}
}
