package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/rightsize/rightsize-go/internal/names"
)

// A keep-alive sandbox is shared across the engine, whatever cache dir a
// process uses: its use lock cannot live in one. It lives in a folder of
// the user's in the temporary folder, which every process of the user on
// the host sees (unless it is given another TMPDIR, or runs in a container
// with a /tmp of its own).

// UseDir creates, when missing, and returns the folder of this user's
// keep-alive use locks in tmp (os.TempDir() when ""): rightsize-<uid>
// (rightsize on Windows, whose temporary folder is the user's own). It
// must be this user's alone, as a cache dir must.
func UseDir(tmp string) (string, error) {
	if tmp == "" {
		tmp = os.TempDir()
	}
	name := "rightsize"
	if runtime.GOOS != "windows" {
		name += "-" + strconv.Itoa(os.Geteuid())
	}
	dir := filepath.Join(tmp, name)
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
	sum := sha256.Sum256([]byte(names.CanonicalBackend(backend) + "\x00" + endpoint))
	return NewFileLock(filepath.Join(dir, name+"."+hex.EncodeToString(sum[:8])+".use")), nil
}
