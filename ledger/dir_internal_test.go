package ledger

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDirFor(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	abs := t.TempDir() // absolute on every platform
	home := filepath.Join(abs, "home", "dev")
	tests := []struct {
		name   string
		goos   string
		env    map[string]string
		want   string // "" when an error is expected
		errHas string
		reason string
	}{
		{"override absolute", "linux", map[string]string{EnvCacheDir: abs, "HOME": home}, abs, "",
			"RIGHTSIZE_CACHE_DIR wins over everything"},
		{"override relative", "linux", map[string]string{EnvCacheDir: filepath.Join("rel", "cache"), "HOME": home}, filepath.Join(wd, "rel", "cache"), "",
			"a relative override is made absolute against the current directory"},
		{"override empty", "linux", map[string]string{EnvCacheDir: "", "HOME": home}, filepath.Join(home, ".cache", "rightsize"), "",
			"an empty value is what a CI variable that expands to nothing gives: unset, never the current directory (a package's source folder under go test)"},
		{"override on windows", "windows", map[string]string{EnvCacheDir: abs, "LOCALAPPDATA": filepath.Join(abs, "lad")}, abs, "",
			"the override wins on Windows too"},
		{"override on darwin", "darwin", map[string]string{EnvCacheDir: "", "HOME": home}, filepath.Join(home, ".cache", "rightsize"), "",
			"the empty override is unset on macOS too"},
		{"linux home", "linux", map[string]string{"HOME": home}, filepath.Join(home, ".cache", "rightsize"), "",
			"$HOME/.cache/rightsize"},
		{"linux ignores XDG", "linux", map[string]string{"HOME": home, "XDG_CACHE_HOME": filepath.Join(abs, "xdg")}, filepath.Join(home, ".cache", "rightsize"), "",
			"the family ignores XDG_CACHE_HOME, so Go must too or the ledgers split"},
		{"darwin home", "darwin", map[string]string{"HOME": home}, filepath.Join(home, ".cache", "rightsize"), "",
			"macOS uses $HOME/.cache/rightsize like the family, not ~/Library/Caches (os.UserCacheDir)"},
		{"darwin ignores XDG", "darwin", map[string]string{"HOME": home, "XDG_CACHE_HOME": filepath.Join(abs, "xdg")}, filepath.Join(home, ".cache", "rightsize"), "",
			"XDG_CACHE_HOME is ignored on macOS too"},
		{"windows localappdata", "windows", map[string]string{"LOCALAPPDATA": filepath.Join(abs, "lad"), "USERPROFILE": filepath.Join(abs, "up"), "HOME": home},
			filepath.Join(abs, "lad", "rightsize"), "", "%LOCALAPPDATA%\\rightsize first; HOME means nothing on Windows"},
		{"windows userprofile", "windows", map[string]string{"USERPROFILE": filepath.Join(abs, "up"), "HOME": home},
			filepath.Join(abs, "up", "AppData", "Local", "rightsize"), "", "without LOCALAPPDATA, %USERPROFILE%\\AppData\\Local\\rightsize"},
		{"windows empty localappdata", "windows", map[string]string{"LOCALAPPDATA": "", "USERPROFILE": filepath.Join(abs, "up")},
			filepath.Join(abs, "up", "AppData", "Local", "rightsize"), "", "an empty LOCALAPPDATA is not a folder: fall back"},
		{"windows nothing", "windows", map[string]string{"HOME": home}, "", "LOCALAPPDATA",
			"no LOCALAPPDATA and no USERPROFILE: an error that says what to set, not a guess"},
		{"linux nothing", "linux", map[string]string{}, "", "HOME",
			"no HOME: an error, never a cache dir in / or the current directory"},
		{"linux empty home", "linux", map[string]string{"HOME": ""}, "", "HOME",
			"an empty HOME is no HOME"},
		{"darwin nothing", "darwin", map[string]string{"XDG_CACHE_HOME": abs}, "", "HOME",
			"no HOME on macOS: an error"},
	}
	for _, tc := range tests {
		lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		got, err := dirFor(tc.goos, lookup)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: dirFor = %q, nil; want an error (%s)", tc.name, got, tc.reason)
			} else if !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), EnvCacheDir) {
				t.Errorf("%s: error %q should name %s and %s (%s)", tc.name, err, tc.errHas, EnvCacheDir, tc.reason)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: dirFor: %v (%s)", tc.name, err, tc.reason)
		} else if got != tc.want {
			t.Errorf("%s: dirFor = %q, want %q (%s)", tc.name, got, tc.want, tc.reason)
		}
	}
}

func TestDirUsesEnvironment(t *testing.T) {
	want := t.TempDir()
	t.Setenv(EnvCacheDir, want)
	if got, err := Dir(); err != nil || got != want {
		t.Errorf("Dir() = %q, %v; want %q from %s", got, err, want, EnvCacheDir)
	}
}
