package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/rightsize/rightsize-go/internal/cachedir"
)

// EnvCacheDir names the variable that overrides the cache directory ([Dir])
// when set to a non-empty value.
const EnvCacheDir = "RIGHTSIZE_CACHE_DIR"

// Dir returns the cache directory, as an absolute path: RIGHTSIZE_CACHE_DIR
// when set and not empty; on Windows %LOCALAPPDATA%\rightsize (else
// %USERPROFILE%\AppData\Local\rightsize); elsewhere, macOS included,
// $HOME/.cache/rightsize. It deliberately does not use os.UserCacheDir,
// whose answer on macOS (~/Library/Caches) and under XDG_CACHE_HOME differs
// from the one every other member of the family uses.
//
// An empty RIGHTSIZE_CACHE_DIR is taken as unset: it is what a CI variable
// that expands to nothing gives, and taking it for the current directory
// would write a ledger into whatever package folder `go test` runs in. The
// other members take it for the current directory; rightsize-go says so
// once, where it sees one.
func Dir() (string, error) {
	return dirFor(runtime.GOOS, os.LookupEnv)
}

func dirFor(goos string, lookup func(string) (string, bool)) (string, error) {
	if v, ok := lookup(EnvCacheDir); ok && v != "" {
		abs, err := filepath.Abs(v)
		if err != nil {
			return "", fmt.Errorf("cache dir %s=%q: %w", EnvCacheDir, v, err)
		}
		return abs, nil
	}
	return cachedir.Default(goos, lookup, EnvCacheDir)
}

// ValidRunID reports whether id can name a run's files: a file stem inside
// the runs folder, nothing more (the other members choose their own ids).
func ValidRunID(id string) bool {
	return id != "" && !strings.ContainsAny(id, `/\`) && !strings.HasPrefix(id, ".") && !strings.HasPrefix(id, "-") && !strings.ContainsRune(id, 0)
}
