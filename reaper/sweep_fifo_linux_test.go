//go:build linux

package reaper_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

// fifoDeadline bounds what a test waits for a call that a FIFO could
// block: far more than a sweep of two runs takes, far less than -timeout.
const fifoDeadline = 30 * time.Second

// within runs fn and fails the test (it never hangs) when fn has not
// returned after d; the FIFOs are then opened from the other side, which
// frees an open(2) blocked on one.
func within[T any](t *testing.T, d time.Duration, fifos []string, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		for _, p := range fifos {
			for _, flag := range []int{os.O_RDONLY, os.O_WRONLY} {
				if f, err := os.OpenFile(p, flag|syscall.O_NONBLOCK, 0); err == nil {
					defer f.Close()
				}
			}
		}
		t.Fatalf("still blocked after %s: a FIFO in the cache dir was opened blocking", d)
		var zero T
		return zero
	}
}

// TestSweepFIFOs: a FIFO where the sweep opens a run's lock file, or where
// it reads a dead owner's stub (fates/.<id>.owner), never blocks it. The
// run whose lock is a FIFO is left alone, saying why (the file is refused,
// not opened); the other is reaped, and its fate written without the stub.
func TestSweepFIFOs(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	cache := t.TempDir()
	runs := runsDir(t, cache)
	fates, err := ledger.EnsureSubdir(cache, ledger.FatesDir)
	must(t, err)
	rec := recordOf(deadProcess(t), backend.Docker, d.Endpoint()).Marshal()

	locked, stubbed := randHex(t, 8), randHex(t, 8)
	lockedCtr, stubbedCtr := uniqueName(t, "fifo"), uniqueName(t, "fifo")
	startContainer(t, d, lockedCtr, "", locked)
	startContainer(t, d, stubbedCtr, "", stubbed)
	writeRun(t, runs, locked, rec, []string{lockedCtr}, nil)
	writeRun(t, runs, stubbed, rec, []string{stubbedCtr}, nil)
	lockFIFO := filepath.Join(runs, locked+ledger.LockExt)
	stubFIFO := ledger.OwnerStubPath(cache, stubbed)
	for _, p := range []string{lockFIFO, stubFIFO} {
		must(t, syscall.Mkfifo(p, 0o600))
	}

	type result struct {
		rep *reaper.Report
		err error
	}
	r := within(t, fifoDeadline, []string{lockFIFO, stubFIFO}, func() result {
		rep, err := reaper.Sweep(context.Background(), d, reaper.WithCacheDir(cache))
		return result{rep, err}
	})
	must(t, r.err)

	lr, ok := r.rep.Run(locked)
	if !ok || lr.Decision != reaper.LeftAlone || !strings.Contains(lr.Reason, "its lock cannot be taken") {
		t.Errorf("run %s, its lock file a FIFO: %+v; want it left alone because its lock cannot be taken", locked, lr)
	}
	if len(lr.Refused) != 1 || !strings.Contains(lr.Refused[0], lockFIFO) || !strings.Contains(lr.Refused[0], "named pipe") {
		t.Errorf("run %s: refused %q; want its lock file named, and what it is", locked, lr.Refused)
	}
	var out strings.Builder
	r.rep.WriteTo(&out)
	if !strings.Contains(out.String(), "! refused: "+lockFIFO+" is a named pipe (FIFO), not a regular file") {
		t.Errorf("the report does not say what was refused:\n%s", out.String())
	}
	if !containerExists(t, d, lockedCtr) {
		t.Errorf("the container of run %s went though its run was not claimed", locked)
	}
	if fi, err := os.Lstat(lockFIFO); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO %s was touched: %v, %v", lockFIFO, fi, err)
	}

	if sr, ok := r.rep.Run(stubbed); !ok || sr.Decision != reaper.Reaped {
		t.Errorf("run %s, its owner's stub a FIFO: %+v; want it reaped", stubbed, sr)
	}
	if containerExists(t, d, stubbedCtr) {
		t.Errorf("the container of run %s is still there", stubbed)
	}
	fs, err := ledger.ReadFates(cache)
	must(t, err)
	if i := slices.IndexFunc(fs, func(f ledger.FateFile) bool { return f.Run == stubbed }); i < 0 {
		t.Errorf("no fate of run %s in %s", stubbed, fates)
	} else if fs[i].Err != nil || fs[i].Owner.Command != "" {
		t.Errorf("fate of run %s: %+v; want it read, with no command (its stub is a FIFO)", stubbed, fs[i])
	}
}
