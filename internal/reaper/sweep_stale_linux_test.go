//go:build linux

package reaper_test

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// TestReapSeesProcessesListedAfterTheScan: a sweep lists the runs folder,
// then judges each run in turn; an owner alive at the listing may start a
// local process (its .processes file new) and die before its run's turn.
// The sweep reaps the run as it is then: the process is ended, never its
// line deleted with the run's files while it runs on. (The chaos harness
// found it: an owner killed mid-Stop of its process, a sibling's
// first-use sweep under way, left the process running with no ledger line
// anywhere.)
func TestReapSeesProcessesListedAfterTheScan(t *testing.T) {
	cache := t.TempDir()
	runs := runsDir(t, cache)
	run := randHex(t, 8)
	writeRun(t, runs, run, recordOf(deadProcess(t), backend.Local, "").Marshal(), []string{"rz-" + run + "-1"}, nil)
	rf, err := ledger.ReadRun(cache, run)
	must(t, err)
	if rf.Has(ledger.ProcessKind) {
		t.Fatal("the run lists processes before it has any")
	}

	me, err := proctree.ReadStat(os.Getpid())
	must(t, err)
	line := proctree.Line(1, me.Session) // the command stays in this session
	cmd := exec.Command("sleep", "1000")
	cmd.Env = append(os.Environ(), proctree.EnvMark+"="+proctree.Mark(run, line))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, cmd.Start())
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL); _ = cmd.Wait() })
	st, err := proctree.ReadStat(pid)
	must(t, err)
	started := proctree.Started(line, proctree.ID(pid, st.StartTicks))
	must(t, os.WriteFile(ledger.LinePath(runs, run, ledger.ProcessKind), []byte(started+"\n"), 0o600))

	rr := reaper.Reap(context.Background(), stubBackend{name: backend.Local}, cache, rf)
	running := alive(pid)
	lines, err := ledger.ReadLines(ledger.LinePath(runs, run, ledger.ProcessKind))
	must(t, err)
	if running && len(lines.Names) == 0 {
		t.Fatalf("the sweep (%s, removed %v, kept %v) left process %d running and deleted its line: no one will ever end it", rr.Decision, rr.Removed, rr.Kept, pid)
	}
	if running {
		t.Errorf("process %d still runs after the sweep (%s, kept %v); its line stays, but it was proven the run's", pid, rr.Decision, rr.Kept)
	}
}
