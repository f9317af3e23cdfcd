package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// EnvCacheDir overrides the cache directory. It is honoured whenever it is
// set, even to the empty string (which names the current directory), as the
// rest of the family does.
const EnvCacheDir = "RIGHTSIZE_CACHE_DIR"

// Sub-folders of the cache directory.
const (
	RunsDir   = "runs"
	ReaperDir = "reaper"
	ReuseDir  = "reuse"
)

// Dir returns the cache directory, as an absolute path: RIGHTSIZE_CACHE_DIR
// when set; on Windows %LOCALAPPDATA%\rightsize (else
// %USERPROFILE%\AppData\Local\rightsize); elsewhere, macOS included,
// $HOME/.cache/rightsize. It deliberately does not use os.UserCacheDir,
// whose answer on macOS (~/Library/Caches) and under XDG_CACHE_HOME differs
// from the one every other member of the family uses.
func Dir() (string, error) {
	return dirFor(runtime.GOOS, os.LookupEnv)
}

func dirFor(goos string, lookup func(string) (string, bool)) (string, error) {
	if v, ok := lookup(EnvCacheDir); ok {
		abs, err := filepath.Abs(v)
		if err != nil {
			return "", fmt.Errorf("cache dir %s=%q: %w", EnvCacheDir, v, err)
		}
		return abs, nil
	}
	get := func(k string) string { v, _ := lookup(k); return v }
	if goos == "windows" {
		if v := get("LOCALAPPDATA"); v != "" {
			return filepath.Join(v, "rightsize"), nil
		}
		if v := get("USERPROFILE"); v != "" {
			return filepath.Join(v, "AppData", "Local", "rightsize"), nil
		}
		return "", errors.New("cache dir: neither LOCALAPPDATA nor USERPROFILE is set; set " + EnvCacheDir)
	}
	if v := get("HOME"); v != "" {
		return filepath.Join(v, ".cache", "rightsize"), nil
	}
	return "", errors.New("cache dir: HOME is not set; set " + EnvCacheDir)
}

// EnsureSubdir creates cache/sub (and cache itself) when missing, with mode
// 0700, and returns its path. The sub-folder must be a real directory: a
// symbolic link there is refused, so nothing the ledger writes or deletes
// can land outside the cache directory.
func EnsureSubdir(cache, sub string) (string, error) {
	if err := mkdir0700(cache, true); err != nil {
		return "", err
	}
	p := filepath.Join(cache, sub)
	if err := mkdir0700(p, false); err != nil {
		return "", err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return "", fmt.Errorf("ledger folder %s: %w", p, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("ledger folder %s is not a directory (%s): refusing to use it", p, fi.Mode().Type())
	}
	return p, nil
}

func mkdir0700(p string, parents bool) error {
	if _, err := os.Stat(p); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ledger folder %s: %w", p, err)
	}
	if parents {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("ledger folder %s: %w", p, err)
		}
	}
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("ledger folder %s: %w", p, err)
	}
	return nil
}
