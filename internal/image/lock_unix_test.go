//go:build unix

package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// The build locks of the images made on an engine (the keeper's, the
// busybox copy's, the demo's, the tests') live in the user's own folder,
// never in the shared temporary folder, and are opened as the ledger's
// files are: what another user plants there, or at the old place in
// $TMPDIR, neither blocks a build nor is followed; what is not a regular
// file is refused, saying what it is.
func TestBuildLockRefusesWhatIsNotAFile(t *testing.T) {
	cli, _ := engineClient(t)
	home, tmp, outside := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_CACHE_HOME", "")
	const missing = "rightsize-lock-test/none:0" // never on the engine: Ensure takes the lock

	// ensure runs Ensure under lock name, bounded: a lock that blocks
	// (a FIFO opened to read waits for a writer) fails the test rather
	// than hang it.
	ensure := func(t *testing.T, name string) (built bool, err error) {
		t.Helper()
		type result struct {
			built bool
			err   error
		}
		done := make(chan result, 1)
		go func() {
			b, err := Ensure(context.Background(), cli, missing, name, func(context.Context) error {
				return errors.New("the build ran")
			})
			done <- result{b, err}
		}()
		select {
		case r := <-done:
			return r.built, r.err
		case <-time.After(30 * time.Second):
			t.Fatalf("Ensure under the lock %s did not return within 30 s: the lock blocks", name)
			return false, nil
		}
	}
	// plant makes what mk makes at the lock's path in the user's folder
	// and at the old one in $TMPDIR, and unblocks, when the test ends, an
	// open that is stuck on a FIFO there.
	plant := func(t *testing.T, name string, mk func(path string) error) string {
		t.Helper()
		path, err := ledger.SharedLockPath(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(path, home+string(filepath.Separator)) {
			t.Fatalf("the lock %s is at %s, outside the user's folder %s", name, path, home)
		}
		for _, p := range []string{path, filepath.Join(tmp, "rightsize-"+name), filepath.Join(tmp, name)} {
			if err := mk(p); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			})
		}
		return path
	}

	t.Run("a FIFO", func(t *testing.T) {
		plant(t, "fifo.lock", func(p string) error { return syscall.Mkfifo(p, 0o666) })
		_, err := ensure(t, "fifo.lock")
		if !errors.Is(err, ledger.ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("Ensure with a FIFO at its lock: %v; want a refusal that says it is a named pipe", err)
		}
	})

	t.Run("a symbolic link", func(t *testing.T) {
		target := filepath.Join(outside, "created-through-the-link")
		plant(t, "link.lock", func(p string) error { return os.Symlink(target, p) })
		_, err := ensure(t, "link.lock")
		if err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("Ensure with a link at its lock: %v; want a refusal that says it is a symbolic link", err)
		}
		if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the link's target %s: %v; it must not be created", target, err)
		}
	})

	t.Run("a folder", func(t *testing.T) {
		plant(t, "dir.lock", func(p string) error { return os.Mkdir(p, 0o700) })
		if _, err := ensure(t, "dir.lock"); !errors.Is(err, ledger.ErrNotRegular) {
			t.Fatalf("Ensure with a folder at its lock: %v; want a refusal", err)
		}
	})

	t.Run("nothing there", func(t *testing.T) {
		path, err := ledger.SharedLockPath("free.lock")
		if err != nil {
			t.Fatal(err)
		}
		built, err := ensure(t, "free.lock")
		if built || err == nil || !strings.Contains(err.Error(), "the build ran") {
			t.Fatalf("Ensure with its lock free: built %v, %v; want the build to run (and fail as it was told to)", built, err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the lock file %s is left behind (%v)", path, err)
		}
		fi, err := os.Lstat(filepath.Dir(path))
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("the locks folder %s: %v, %v; want it private (0700)", filepath.Dir(path), fi.Mode(), err)
		}
	})

	t.Run("not a file name", func(t *testing.T) {
		for _, name := range []string{"", "../up.lock", "a/b.lock", ".."} {
			if _, err := ensure(t, name); err == nil || strings.Contains(err.Error(), "the build ran") {
				t.Errorf("Ensure under the lock %q: %v; want it refused", name, err)
			}
		}
	})
}
