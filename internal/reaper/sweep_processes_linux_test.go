//go:build linux

package reaper_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// A dead run's command has gone, and what it left in its process group
// lost the mark (a cleared environment): nothing proves that group still
// the command's, so a sweep signals nothing, keeps the run and says why,
// each time; a person's sweep of the run forgets it, signalling nothing.
func TestSweepKeepsWhatItCannotProve(t *testing.T) {
	run := randHex(t, 8)
	c := exec.Command("/bin/sh", "-c", "(env -i sleep 1000 &); exit 0")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, c.Start())
	st, err := proctree.ReadStat(c.Process.Pid)
	must(t, err)
	pgid := c.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	var orphan int
	proctest.WaitUntil(t, 10*time.Second, "the orphaned sleep", func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			// The sleep itself, not the subshell that forks it and exits.
			if s, err := proctree.ReadStat(pid); err == nil && s.Pgrp == pgid && s.Comm == "sleep" && !s.Zombie() {
				orphan = pid
				return true
			}
		}
		return false
	})
	must(t, c.Wait()) // the command is gone, and reaped

	cache := t.TempDir()
	runs := runsDir(t, cache)
	rec := recordOf(deadProcess(t), backend.Local, "")
	line := proctree.Started(proctree.Line(1, st.Session), proctree.ID(pgid, st.StartTicks))
	writeRun(t, runs, run, rec.Marshal(), nil, nil)
	must(t, os.WriteFile(ledger.LinePath(runs, run, ledger.ProcessKind), []byte(line+"\n"), 0o600))
	b := stubBackend{name: backend.Docker}

	for range 2 {
		rep, err := reaper.Sweep(context.Background(), b, reaper.WithCacheDir(cache))
		must(t, err)
		rr := only(t, rep)
		if rr.Decision != reaper.Kept || len(rr.Kept) != 1 || !strings.Contains(rr.Kept[0].Note, "nothing proves") {
			t.Fatalf("the sweep: %q, kept %v; want kept, the orphan said to be unproven", rr.Decision, rr.Kept)
		}
		if !alive(orphan) {
			t.Fatalf("the sweep signalled %d, which nothing proves the run's", orphan)
		}
	}
	rep, err := reaper.Sweep(context.Background(), b, reaper.WithCacheDir(cache), reaper.OnlyRun(run))
	must(t, err)
	if rr := only(t, rep); rr.Decision != reaper.Reaped || len(rr.NotOwned) != 1 || !strings.Contains(rr.NotOwned[0].Note, "forgotten by hand") {
		t.Errorf("by hand: %q, not the run's %v; want reaped, the orphan forgotten", rr.Decision, rr.NotOwned)
	}
	if !alive(orphan) {
		t.Errorf("the sweep by hand signalled %d", orphan)
	}
}
