//go:build unix

package ledger_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/ledger"
)

// A cache dir another local user made first, or one anybody may write to,
// is refused before anything is read from it or written to it: rightsize
// removes what its files list and runs the script it keeps there.
func TestEnsureSubdirRefusesSquattedFolders(t *testing.T) {
	type setup func(t *testing.T, cache string)
	chmod := func(p string, mode os.FileMode) func(*testing.T, string) {
		return func(t *testing.T, cache string) {
			if err := os.Chmod(filepath.Join(cache, p), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	chown := func(p string) func(*testing.T, string) {
		return func(t *testing.T, cache string) {
			if os.Geteuid() != 0 {
				t.Skip("giving a folder to another user needs root")
			}
			if err := os.Chown(filepath.Join(cache, p), 12345, 12345); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name, has string
		setup     setup
		reason    string
	}{
		{"cache world-writable", "mode 0777", chmod(".", 0o777), "anyone could swap runs/ for their own"},
		{"runs world-writable", "mode 0777", chmod("runs", 0o777), "a line file anyone may append to"},
		{"reaper sticky world-writable", "mode 0777", chmod("reaper", 0o1777), "the sticky bit does not stop new files"},
		{"cache of another user", "owned by uid 12345", chown("."), "made first by another local user"},
		{"runs of another user", "owned by uid 12345", chown("runs"), "a sub-folder another user made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "rightsize")
			for _, sub := range []string{ledger.RunsDir, ledger.ReaperDir} {
				if _, err := ledger.EnsureSubdir(cache, sub); err != nil {
					t.Fatal(err)
				}
			}
			tc.setup(t, cache)
			sub := ledger.RunsDir
			if strings.HasPrefix(tc.name, "reaper") {
				sub = ledger.ReaperDir
			}
			_, err := ledger.EnsureSubdir(cache, sub)
			var ue *ledger.UnsafeDirError
			if !errors.As(err, &ue) {
				t.Fatalf("EnsureSubdir = %v; want an *UnsafeDirError (%s)", err, tc.reason)
			}
			for _, want := range []string{ue.Path, tc.has, "chmod 700", ledger.EnvCacheDir} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if _, err := ledger.ScanRuns(cache); !errors.As(err, &ue) && sub == ledger.RunsDir {
				t.Errorf("ScanRuns read a folder that is not private: %v", err)
			}
			if _, err := ledger.NewRun(cache, ledger.Owner{Backend: "docker"}); !errors.As(err, &ue) && sub == ledger.RunsDir {
				t.Errorf("NewRun in a folder that is not private: %v", err)
			}
		})
	}
}

// A private folder made with a permissive umask is still private: 0700 is
// asked for, and a group-readable folder (0750) is fine, as ssh has it.
func TestEnsureSubdirAcceptsPrivateFolders(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "rightsize")
	if _, err := ledger.EnsureSubdir(cache, ledger.RunsDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.EnsureSubdir(cache, ledger.RunsDir); err != nil {
		t.Errorf("a 0755 cache dir (readable, not writable, by others): %v", err)
	}
	fi, err := os.Stat(filepath.Join(cache, ledger.RunsDir))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("runs/ made with mode %v, want 0700", fi.Mode().Perm())
	}
}
