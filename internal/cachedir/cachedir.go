// Package cachedir knows where the family keeps its cache folder when no
// RIGHTSIZE_CACHE_DIR names one. It is a leaf: the public ledger package
// builds its Dir on it, and internal/ledger its per-user folders.
package cachedir

import (
	"errors"
	"path/filepath"
)

// Default is the cache folder the family's members use by default on goos,
// with lookup reading the environment: on Windows %LOCALAPPDATA%\rightsize
// (else %USERPROFILE%\AppData\Local\rightsize); elsewhere, macOS included,
// $HOME/.cache/rightsize. It deliberately does not use os.UserCacheDir,
// whose answer on macOS (~/Library/Caches) and under XDG_CACHE_HOME differs
// from the one every other member of the family uses. hint names what the
// user may set instead, for the error when neither is there.
func Default(goos string, lookup func(string) (string, bool), hint string) (string, error) {
	get := func(k string) string { v, _ := lookup(k); return v }
	if goos == "windows" {
		if v := get("LOCALAPPDATA"); v != "" {
			return filepath.Join(v, "rightsize"), nil
		}
		if v := get("USERPROFILE"); v != "" {
			return filepath.Join(v, "AppData", "Local", "rightsize"), nil
		}
		return "", errors.New("cache dir: neither LOCALAPPDATA nor USERPROFILE is set; set " + hint)
	}
	if v := get("HOME"); v != "" {
		return filepath.Join(v, ".cache", "rightsize"), nil
	}
	return "", errors.New("cache dir: HOME is not set; set " + hint)
}
