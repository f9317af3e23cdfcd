package ledger

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/rightsize/rightsize-go/internal/cachedir"
)

// Sub-folders of the cache directory.
const (
	RunsDir   = "runs"
	ReaperDir = "reaper"
	ReuseDir  = "reuse"
	// FatesDir holds what became of each ended run (rightsize-go only).
	FatesDir = "fates"
	// LocksDir holds rightsize-go's locks that the processes of this user
	// share whatever cache dir each was given: those that serialize the
	// build of an image on an engine (SharedLockPath).
	LocksDir = "locks"
)

// UserDir is the cache dir of a process given no RIGHTSIZE_CACHE_DIR: the
// user's own, the same for every process of the user on this host.
func UserDir() (string, error) {
	return cachedir.Default(runtime.GOOS, os.LookupEnv, EnvCacheDir)
}

// SharedLockPath is the path of the lock file name in the LocksDir of the
// user's cache dir (UserDir; the cache dir this process uses where that
// one cannot be made), which it makes when missing and checks is this
// user's alone: a lock that the processes of the user share whatever
// RIGHTSIZE_CACHE_DIR each was given, and that no other user can squat
// with a FIFO or a link (NewFileLock refuses anything but a regular file
// there).
func SharedLockPath(name string) (string, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return "", fmt.Errorf("lock %q: not a file name", name)
	}
	dir, err := UserDir()
	if err == nil {
		var locks string
		if locks, err = EnsureSubdir(dir, LocksDir); err == nil {
			return filepath.Join(locks, name), nil
		}
		var unsafe *UnsafeDirError
		if errors.As(err, &unsafe) {
			return "", err
		}
	}
	// No HOME, or a cache dir that cannot be made there (a read-only
	// home): the one this process was given, if another.
	own, derr := Dir()
	if derr != nil || own == dir {
		return "", fmt.Errorf("lock %s: %w", name, err)
	}
	locks, err := EnsureSubdir(own, LocksDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(locks, name), nil
}

// EmptyCacheDirNote is what a user whose RIGHTSIZE_CACHE_DIR is set to the
// empty string must be told, "" otherwise: rightsize-go reads it as unset,
// the Rust, Kotlin and Node members as the current directory, so the two
// do not share a ledger.
func EmptyCacheDirNote() string {
	if v, ok := os.LookupEnv(EnvCacheDir); !ok || v != "" {
		return ""
	}
	where := "its default cache dir"
	if dir, err := Dir(); err == nil {
		where += " " + dir
	}
	return fmt.Sprintf("rightsize: %s is set but empty: rightsize-go uses %s (go test runs each package in its own folder), "+
		"while the Rust, Kotlin and Node members use the current directory, so they do not share this ledger; unset it, or set it to a folder", EnvCacheDir, where)
}

var emptyNoteOnce sync.Once

// TellEmptyCacheDir writes EmptyCacheDirNote to w, once per process.
func TellEmptyCacheDir(w io.Writer) {
	if note := EmptyCacheDirNote(); note != "" {
		emptyNoteOnce.Do(func() { fmt.Fprintln(w, note) })
	}
}

// EnsureSubdir creates cache/sub (and cache itself) when missing, with mode
// 0700, checks that both are this user's alone (CheckPrivate), and returns
// the sub-folder's path. The sub-folder must be a real directory: a
// symbolic link there is refused, so nothing the ledger writes or deletes
// can land outside the cache directory.
func EnsureSubdir(cache, sub string) (string, error) {
	if err := mkdir0700(cache, true); err != nil {
		return "", err
	}
	return subdir(cache, sub)
}

// existingSubdir is EnsureSubdir for what is written of a run already
// recorded in cache: a fate, written after the run has ended. A cache dir
// that is gone (a test's temporary folder, removed as the test ended)
// is not made again: the error wraps fs.ErrNotExist.
func existingSubdir(cache, sub string) (string, error) {
	if _, err := os.Lstat(cache); err != nil {
		return "", fmt.Errorf("ledger folder %s: %w", cache, err)
	}
	return subdir(cache, sub)
}

// subdir makes cache/sub when missing, and checks that both are this
// user's alone.
func subdir(cache, sub string) (string, error) {
	if err := CheckPrivate(cache); err != nil {
		return "", err
	}
	p := filepath.Join(cache, sub)
	if err := mkdir0700(p, false); err != nil {
		return "", err
	}
	if err := CheckPrivate(p); err != nil {
		return "", err
	}
	return p, nil
}

// UnsafeDirError is a ledger folder that someone other than this user could
// write to: rightsize reads what to remove from it, and writes the script
// its watchdog runs there. Nothing is read from or written to it.
type UnsafeDirError struct {
	Path string
	// Why says what is wrong: its owner, its mode, or its type.
	Why string
}

func (e *UnsafeDirError) Error() string {
	return fmt.Sprintf("ledger folder %s is not yours alone (%s): another local user could make rightsize remove or run what they choose; "+
		"nothing was read from it or written to it. Remove it, or make it yours and private (chown it to yourself; chmod 700), or set %s to a folder of your own",
		e.Path, e.Why, EnvCacheDir)
}

// CheckPrivate reports an *UnsafeDirError unless p is a directory (not a
// symbolic link) owned by this process's effective user and writable by no
// one else, as ssh requires of ~/.ssh: not by everyone, and by its group
// only when that group has no member but the user (a user private group
// under umask 002, on Linux). Where ownership cannot be read cheaply
// (Windows), only the type is checked.
func CheckPrivate(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("ledger folder %s: %w", p, err)
	}
	if !fi.IsDir() {
		return &UnsafeDirError{Path: p, Why: "it is not a directory but " + describeType(fi.Mode())}
	}
	return checkOwner(p, fi)
}

func describeType(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsRegular():
		return "a file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return m.Type().String()
	}
}

func mkdir0700(p string, parents bool) error {
	if _, err := os.Lstat(p); err == nil {
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
