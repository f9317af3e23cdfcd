//go:build unix

package ledger_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize-go/ledger"
)

func fcntlFlags(f *os.File) (int, error) { return unix.FcntlInt(f.Fd(), unix.F_GETFL, 0) }

// within runs fn, failing the test (never hanging it) when fn has not
// returned after d: a blocking open of a FIFO waits for a peer that never
// comes. fifo, when set, is opened from the other side to free fn then.
func within(t *testing.T, d time.Duration, fifo string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		if fifo != "" {
			for _, flag := range []int{os.O_RDONLY, os.O_WRONLY} {
				if f, err := os.OpenFile(fifo, flag|syscall.O_NONBLOCK, 0); err == nil {
					defer f.Close()
				}
			}
		}
		t.Fatalf("still blocked after %s: the FIFO was opened blocking", d)
		return nil
	}
}

func mkfifo(t *testing.T, p string) string {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenFileRefusesFIFO: every way the ledger opens a file of the cache
// dir — to read, to append, to create exclusively, to lock shared or
// exclusively — returns at once with ErrNotRegular for a FIFO at its
// path, naming the path and what it is.
func TestOpenFileRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := mkfifo(t, filepath.Join(dir, "x.lock"))
	cases := map[string]func() error{
		"read":    func() error { _, err := ledger.OpenFile(fifo, os.O_RDONLY, 0); return err },
		"write":   func() error { _, err := ledger.OpenFile(fifo, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); return err },
		"rdwr":    func() error { _, err := ledger.OpenFile(fifo, os.O_RDWR|os.O_CREATE, 0o600); return err },
		"bounded": func() error { _, err := ledger.ReadFile(fifo, 1<<10); return err },
		"lock":    func() error { _, err := ledger.NewFileLock(fifo).TryLock(); return err },
		"rlock":   func() error { _, err := ledger.NewFileLock(fifo).TryRLock(); return err },
	}
	for name, fn := range cases {
		t.Run(name, func(t *testing.T) {
			err := within(t, 10*time.Second, fifo, fn)
			if !errors.Is(err, ledger.ErrNotRegular) {
				t.Fatalf("err = %v, want ledger.ErrNotRegular", err)
			}
			if msg := err.Error(); !strings.Contains(msg, fifo) || !strings.Contains(msg, "named pipe") {
				t.Errorf("err = %q: want the path and what is there (a named pipe)", msg)
			}
		})
	}
}

// TestOpenFileRefusesLinksAndFolders: a symbolic link is never followed,
// a directory never opened as a file.
func TestOpenFileRefusesLinksAndFolders(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.OpenFile(link, os.O_RDONLY, 0); err == nil || !strings.Contains(err.Error(), "symbolic link: not followed") {
		t.Errorf("OpenFile(link) = %v, want it refused as a symbolic link", err)
	}
	if _, err := ledger.OpenFile(dir, os.O_RDONLY, 0); !errors.Is(err, ledger.ErrNotRegular) {
		t.Errorf("OpenFile(dir) = %v, want ledger.ErrNotRegular", err)
	}
	f, err := ledger.OpenFile(target, os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("OpenFile(regular file) = %v", err)
	}
	defer f.Close()
	// Blocking again: what Go's poller needs of a regular file.
	if fl, err := fcntlFlags(f); err != nil || fl&syscall.O_NONBLOCK != 0 {
		t.Errorf("the file is left non-blocking (flags %#o, %v)", fl, err)
	}
}

// TestFileLock: exclusive and shared locks exclude as flock's do, across
// two locks on one path; a lock whose file its holder removed is not
// taken on that removed file.
func TestFileLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run.lock")
	a, b := ledger.NewFileLock(p), ledger.NewFileLock(p)
	if ok, err := a.TryLock(); !ok || err != nil {
		t.Fatalf("a.TryLock = %v, %v", ok, err)
	}
	if ok, err := b.TryRLock(); ok || err != nil {
		t.Fatalf("b.TryRLock while a holds it = %v, %v; want false, nil", ok, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file %v, %v: want mode 0600", fi, err)
	}
	// a removes the file, then unlocks: b must lock a file at the path.
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryLock(); !ok || err != nil {
		t.Fatalf("b.TryLock after a's Remove = %v, %v", ok, err)
	}
	held, err := b.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if now, err := os.Lstat(p); err != nil || !os.SameFile(held, now) {
		t.Errorf("b holds a file that is not the one at %s (%v)", p, err)
	}
	if ok, _ := a.TryRLock(); ok {
		t.Error("a took a shared lock while b holds it exclusively")
	}
	b.Unlock()
	if ok, err := a.TryRLock(); !ok || err != nil {
		t.Fatalf("a.TryRLock = %v, %v", ok, err)
	}
	if ok, err := b.TryRLock(); !ok || err != nil {
		t.Fatalf("b.TryRLock beside a's shared lock = %v, %v", ok, err)
	}
	a.Unlock()
	b.Unlock()
}
