package ledger_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A FIFO planted where a line file should be must not hang the reader: a
// blocking open of a FIFO waits for a writer that never comes.
func TestReadLinesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run.sandboxes")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	type result struct {
		names []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		names, _, err := readLines3(p)
		done <- result{names, err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			t.Errorf("ReadLines(FIFO) = %q, nil error; want an error: it is not a regular file", r.names)
		}
	case <-time.After(10 * time.Second):
		// Unblock the reader so the test binary can exit: opening the
		// write end completes its open.
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("ReadLines(FIFO) still blocked after 10 s: it opened the FIFO blocking")
	}
}
