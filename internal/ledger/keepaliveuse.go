package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/names"
)

// A keep-alive sandbox is shared across the engine, whatever cache dir a
// process uses: its use lock cannot live in one. It lives in a folder of
// the user's in the temporary folder, which every process of the user on
// the host sees (unless it is given another TMPDIR, or runs in a container
// with a /tmp of its own).

// UseDirPath is where UseDir(tmp) is, made or not: what only reads the
// use locks and records need not make it.
func UseDirPath(tmp string) string {
	if tmp == "" {
		tmp = os.TempDir()
	}
	name := "rightsize"
	if runtime.GOOS != "windows" {
		name += "-" + strconv.Itoa(os.Geteuid())
	}
	return filepath.Join(tmp, name)
}

// UseDir creates, when missing, and returns the folder of this user's
// keep-alive use locks in tmp (os.TempDir() when ""): rightsize-<uid>
// (rightsize on Windows, whose temporary folder is the user's own). It
// must be this user's alone, as a cache dir must.
func UseDir(tmp string) (string, error) {
	dir := UseDirPath(tmp)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("keep-alive use locks: %w", err)
	}
	if err := CheckPrivate(dir); err != nil {
		var unsafe *UnsafeDirError
		if errors.As(err, &unsafe) {
			return "", fmt.Errorf("keep-alive use locks: %s is not yours alone (%s): remove it, or set TMPDIR to a folder of your own", dir, unsafe.Why)
		}
		return "", fmt.Errorf("keep-alive use locks: %w", err)
	}
	return dir, nil
}

// KeepAliveUseLock is the lock of keep-alive sandbox name on the engine
// of backend at endpoint, in dir (UseDir). A rightsize-go process holds it
// shared from before it adopts or creates the sandbox for as long as it
// lives; whoever removes the sandbox for a reason other than a person's
// say (`rightsize reuse prune`, a replacement for a stale image) takes it
// exclusively around its check and the removal, and no one else has it.
func KeepAliveUseLock(dir, backend, endpoint, name string) (*FileLock, error) {
	if !names.Valid(name) {
		return nil, fmt.Errorf("keep-alive use lock: %q is not a sandbox name", name)
	}
	return NewFileLock(filepath.Join(dir, keepAliveKey(backend, endpoint, name)+".use")), nil
}

// keepAliveKey names keep-alive name on the engine of backend at endpoint
// among the files of a folder: its use lock and its use records.
func keepAliveKey(backend, endpoint, name string) string {
	sum := sha256.Sum256([]byte(names.CanonicalBackend(backend) + "\x00" + endpoint))
	return name + "." + hex.EncodeToString(sum[:8])
}

// KeepAliveUse is rightsize-go's own record of the last use of a
// keep-alive sandbox by one of its test processes, from which a sweep
// judges how long it has been idle (Spec.ReuseTTL, RIGHTSIZE_REUSE_TTL).
// It is a file of its own, <name>.<engine>.used, written twice: in the use
// dir, which every process of the user on the host sees whatever its cache
// dir, and in the keep-alive registry folder of the process's cache dir,
// which outlives a temporary folder that the system empties. The other
// members never read either.
type KeepAliveUse struct {
	Name     string `json:"name"`
	Backend  string `json:"backend"`
	Endpoint string `json:"endpoint"`
	// Hash is the keep-alive's identity (ReuseIdentity.Hash).
	Hash string `json:"hash,omitempty"`
	// TTL is the idle time-to-live the last process that used it asked
	// for (Spec.ReuseTTL), as a Go duration; "" when it asked for none.
	TTL string `json:"ttl,omitempty"`
	// LastUsed is the file's modification time, not a field: a use is
	// told by touching the file, never by a rewrite that could lose what
	// another writer wrote meanwhile.
	LastUsed time.Time `json:"-"`
	// Path is the file it was read from.
	Path string `json:"-"`
}

// useRecordExt ends the name of a use record.
const useRecordExt = ".used"

// maxUseRecord bounds a use record's size, as read.
const maxUseRecord = 64 << 10

// KeepAliveUsePath is the path of the use record of keep-alive name on the
// engine of backend at endpoint, in dir (the use dir, or the registry
// folder of a cache dir).
func KeepAliveUsePath(dir, backend, endpoint, name string) (string, error) {
	if !names.Valid(name) {
		return "", fmt.Errorf("keep-alive use record: %q is not a sandbox name", name)
	}
	return filepath.Join(dir, keepAliveKey(backend, endpoint, name)+useRecordExt), nil
}

// WriteKeepAliveUse writes u's record in dir, atomically: used now.
func WriteKeepAliveUse(dir string, u KeepAliveUse) error {
	path, err := KeepAliveUsePath(dir, u.Backend, u.Endpoint, u.Name)
	if err != nil {
		return err
	}
	if u.TTL != "" {
		if _, err := time.ParseDuration(u.TTL); err != nil {
			return fmt.Errorf("keep-alive use record %s: ttl %q: %w", u.Name, u.TTL, err)
		}
	}
	u.Backend = names.CanonicalBackend(u.Backend)
	data, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("keep-alive use record %s: %w", u.Name, err)
	}
	return writeAtomic(path, append(data, '\n'))
}

// TouchKeepAliveUse marks the use record at path as used at t; a record
// that is not there is an error wrapping fs.ErrNotExist.
func TouchKeepAliveUse(path string, t time.Time) error { return os.Chtimes(path, t, t) }

// KeepAliveUses reads every use record in dir, of every engine; a file
// that cannot be read, or whose name is not the one its content gives,
// is skipped. A missing dir holds none.
func KeepAliveUses(dir string) ([]KeepAliveUse, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("keep-alive use records: %w", err)
	}
	var out []KeepAliveUse
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), useRecordExt) || !e.Type().IsRegular() {
			continue
		}
		u, err := readKeepAliveUse(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if want, err := KeepAliveUsePath(dir, u.Backend, u.Endpoint, u.Name); err != nil || filepath.Base(want) != e.Name() {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

func readKeepAliveUse(path string) (KeepAliveUse, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return KeepAliveUse{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return KeepAliveUse{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxUseRecord+1))
	if err != nil {
		return KeepAliveUse{}, err
	}
	if len(data) > maxUseRecord {
		return KeepAliveUse{}, fmt.Errorf("keep-alive use record %s: larger than %d bytes", path, maxUseRecord)
	}
	var u KeepAliveUse
	if err := json.Unmarshal(data, &u); err != nil {
		return KeepAliveUse{}, fmt.Errorf("keep-alive use record %s: %w", path, err)
	}
	u.Backend = names.CanonicalBackend(u.Backend)
	u.LastUsed, u.Path = fi.ModTime(), path
	return u, nil
}

// RemoveKeepAliveUse deletes the use record of keep-alive name in dir; a
// missing one is no error.
func RemoveKeepAliveUse(dir, backend, endpoint, name string) error {
	path, err := KeepAliveUsePath(dir, backend, endpoint, name)
	if err != nil {
		return err
	}
	return removeIfExists(path)
}
