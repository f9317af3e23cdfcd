//go:build unix

package sandboxtest

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO at the summary's path neither hangs the telling nor counts as a
// place the fate was seen.
func TestTellFatesSummaryFIFO(t *testing.T) {
	errs := tellCase(t, "", false)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envStepSummary, fifo)
	cache := oneFate(t)
	done := make(chan struct{})
	go func() { tellFates(cache, ""); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("telling hangs on a FIFO at the summary's path")
	}
	if !strings.Contains(errs.String(), "could not be added to the job's summary") || !strings.Contains(errs.String(), "rightsize: run dead0042") {
		t.Errorf("want the line on stderr and why the summary did not get it:\n%s", errs)
	}
	if n := untold(t, cache); n != 1 {
		t.Errorf("%d fates untold, want 1: the summary did not get it", n)
	}
}
