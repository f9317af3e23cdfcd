//go:build unix

package memory_test

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// TestFIFOIsNoObject: a FIFO where an object's file would be is refused
// at once, never opened for a read that would wait for a writer.
func TestFIFOIsNoObject(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	c := ctx(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "sandbox.fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Adopt(c, "fifo"); err == nil || errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Adopt of a FIFO = %v, want an error", err)
	}
	if got := d.Remove(c, backend.SandboxKind, "r", []string{"fifo"})[0]; got == nil || errors.Is(got, backend.ErrNotFound) {
		t.Errorf("Remove of a FIFO = %v, want an error that keeps it listed", got)
	}
	if ids, err := d.ListRun(c, backend.SandboxKind, "r"); err != nil || len(ids) != 0 {
		t.Errorf("ListRun over a FIFO = %q, %v", ids, err)
	}
}
