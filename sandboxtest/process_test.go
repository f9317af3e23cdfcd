//go:build linux

package sandboxtest_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// runProcesses lists the live processes of this binary's run.
func runProcesses(t *testing.T) []int {
	t.Helper()
	in, err := sandboxtest.Session(t.Context())
	require.NoError(t, err)
	return proctree.Live(proctree.OfRun(in.RunID))
}

// waitProcesses polls until cond holds of the run's live processes.
func waitProcesses(t *testing.T, what string, cond func([]int) bool) []int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		live := runProcesses(t)
		if cond(live) {
			return live
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s: live %v", what, live)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A tree — a command, a child of it, and a grandchild whose parent
// exited (double fork) — ends with the test that started it, and the
// run's ledger forgets it.
func TestStartProcessEndsWithTheTest(t *testing.T) {
	testimage.Engine(t)
	var pid int
	t.Run("test", func(t *testing.T) {
		p := sandboxtest.StartProcess(t, exec.Command("/bin/sh", "-c", "sleep 1000 & (sleep 1000 &); echo up; wait"))
		pid = p.Pid()
		require.NoError(t, p.WaitForLog(t.Context(), "up"))
		waitProcesses(t, "the tree's three processes", func(l []int) bool { return len(l) >= 3 })
	})
	require.NotZero(t, pid)
	require.Empty(t, runProcesses(t), "the tree outlived its test")
	require.Empty(t, sandboxtest.ProcessLines(t), "the ledger still lists the process")
}

// Stop ends the tree and says how the command ended; Wait returns when
// the command itself exits.
func TestProcessStopAndWait(t *testing.T) {
	testimage.Engine(t)
	p := sandboxtest.StartProcess(t, exec.Command("/bin/sh", "-c", "sleep 1000 & exit 3"))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := p.Wait(ctx)
	require.EqualError(t, err, "exit status 3")
	require.True(t, p.Exited())
	waitProcesses(t, "the orphaned sleep", func(l []int) bool { return len(l) == 1 })
	require.NoError(t, p.Stop(ctx))
	require.Empty(t, runProcesses(t), "Stop left the command's child")
	require.NoError(t, p.Stop(ctx), "a second Stop")
}

// The end of an exec.CommandContext's context ends the whole tree, not
// only the command.
func TestProcessContextEndsTheTree(t *testing.T) {
	testimage.Engine(t)
	ctx, cancel := context.WithCancel(t.Context())
	p := sandboxtest.StartProcess(t, exec.CommandContext(ctx, "/bin/sh", "-c", "sleep 1000 & sleep 1000 & wait"))
	waitProcesses(t, "the tree", func(l []int) bool { return len(l) >= 3 })
	cancel()
	waitProcesses(t, "the tree to end with its context", func(l []int) bool { return len(l) == 0 })
	// The command's exit is collected once the tree is ended (its zombie
	// holds the group's number until then): wait for it, bounded.
	wctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer wcancel()
	require.Error(t, p.Wait(wctx), "the command ended by its context exited 0")
	require.NoError(t, wctx.Err(), "the command's exit was not collected within 20 s")
	require.True(t, p.Exited())
}

// WaitForPort waits for a port the command opens; WaitForLog for a line
// it prints; both give up when the command exits first.
func TestProcessReadiness(t *testing.T) {
	testimage.Engine(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessHelper$")
	cmd.Env = append(os.Environ(), "RIGHTSIZE_TEST_KEEP_ENV=1", "RZ_PROCESS_HELPER_LISTEN="+addr)
	p := sandboxtest.StartProcess(t, cmd)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.WaitForPort(ctx, addr))
	require.NoError(t, p.WaitForLog(ctx, "listening on "+addr))

	quick := sandboxtest.StartProcess(t, exec.Command("/bin/sh", "-c", "echo bye"))
	err = quick.WaitForLog(ctx, "never printed")
	require.ErrorContains(t, err, "exited")
	require.Contains(t, quick.Output(), "bye")

	// Wait returns the exit status, and what the command printed before
	// it exited is in Output then.
	last := sandboxtest.StartProcess(t, exec.Command("/bin/sh", "-c", "echo last words; exit 3"))
	require.ErrorContains(t, last.Wait(ctx), "exit status 3")
	require.Contains(t, last.Output(), "last words")
}

// TestProcessHelper is the command of TestProcessReadiness: it listens,
// says so, and waits to be ended.
func TestProcessHelper(t *testing.T) {
	addr := os.Getenv("RZ_PROCESS_HELPER_LISTEN")
	if addr == "" {
		t.Skip("a helper of TestProcessReadiness")
	}
	time.Sleep(200 * time.Millisecond) // the port is not open at once
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("listening on " + addr)
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// A command that asks for a session of its own is refused: its tree could
// not be ended with its group.
func TestStartProcessRefusesSetsid(t *testing.T) {
	testimage.Engine(t)
	cmd := exec.Command("sleep", "1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	r := &recordingTB{TB: t}
	r.run(func(tb testing.TB) { sandboxtest.StartProcess(tb, cmd) })
	require.Len(t, r.fatals, 1)
	require.True(t, strings.Contains(r.fatals[0], "Setsid"), r.fatals[0])
	require.Nil(t, cmd.Process, "the command was started")
}

// With no container engine at all, local processes have the same
// guarantees: the run is recorded as the local backend's, and when its
// owner is SIGKILLed its watchdog ends them, one that wrote its title over
// its mark included. The record is Go's own only: the Node member reads
// backend "local" as unparseable and deletes such a record once it is an
// hour old, live owner or not (sweep.ts, rightsize-node 0b3b667), so it
// lists no runs/*.json.
func TestStartProcessWithoutAnEngine(t *testing.T) {
	cache := t.TempDir()
	h := startHelper(t, "process-alone", cache, "DOCKER_HOST=unix://"+filepath.Join(cache, "no-engine.sock"), "RIGHTSIZE_BACKEND=")
	pid, err := strconv.Atoi(h.Expect("pid"))
	require.NoError(t, err)
	pids := []int{pid}
	if v, ok := h.Value("lost"); ok {
		lost, err := strconv.Atoi(v)
		require.NoError(t, err)
		pids = append(pids, lost)
	} else {
		t.Log("no perl here: the process that loses its mark is not tried")
	}
	recs, _ := filepath.Glob(filepath.Join(cache, "runs", "*"+ledger.OwnRecordExt))
	require.Len(t, recs, 1)
	b, err := os.ReadFile(recs[0])
	require.NoError(t, err)
	require.Contains(t, string(b), `"backend":"local"`)
	family, _ := filepath.Glob(filepath.Join(cache, "runs", "*.json"))
	require.Empty(t, family, "a local run shown to the other members, who cannot judge it")
	ticks := map[int]uint64{}
	for _, p := range pids {
		st, err := proctree.ReadStat(p)
		require.NoError(t, err)
		ticks[p] = st.StartTicks
	}
	t.Cleanup(func() {
		for p, tk := range ticks {
			if st, err := proctree.ReadStat(p); err == nil && st.StartTicks == tk {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	h.KillAndWait()
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range pids {
		for {
			st, err := proctree.ReadStat(p)
			if err != nil || st.Zombie() || st.StartTicks != ticks[p] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the process %d (%s) outlived its owner by 20 s", p, st.Comm)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The watchdog's last step is deleting the run's process lines and
	// then its record (after its fate is written): wait for it, so that
	// nothing writes into the cache dir while the test removes it.
	for {
		left, _ := filepath.Glob(filepath.Join(cache, "runs", "*"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watchdog left %q 20 s after the owner was killed", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Processes caught in an exec when their owner is SIGKILLed are ended by
// its watchdog all the same, and the run's lines go only once they are:
// while a process execs, its environment (and its mark) reads empty for a
// moment, and a watchdog that took such a process for gone said the run
// was clean, deleted its lines, and left it running with nothing to find
// it again (`sh -c 'sleep 1000 & exec sleep 1000'`, once in a few
// thousand deaths). Here the whole tree execs over and over, so that each
// death catches some of it in one.
func TestStartProcessExecsWhenItsOwnerIsKilled(t *testing.T) {
	reexec := filepath.Join(t.TempDir(), "reexec.sh")
	require.NoError(t, os.WriteFile(reexec, []byte("[ \"$1\" -gt 0 ] && exec /bin/sh \"$0\" $(($1 - 1))\nexec sleep 1000\n"), 0o600))
	for i := range 12 {
		cache := t.TempDir()
		// The watchdogs log (RIGHTSIZE_REAPER_DEBUG): what they ended,
		// and what they left and why, is what a failure here needs.
		h := startHelper(t, "process-execs", cache, "DOCKER_HOST=unix://"+filepath.Join(cache, "no-engine.sock"), "RIGHTSIZE_BACKEND=", "RZ_TEST_REEXEC="+reexec, "RIGHTSIZE_REAPER_DEBUG=1")
		run := h.Expect("run")
		t.Cleanup(func() { proctree.End(proctree.Scope{Marks: proctree.OfRun(run)}, 0, true) })
		h.KillAndWait()
		// The watchdog deletes the run's lines last, once it has ended
		// every process: then none may be left.
		deadline := time.Now().Add(30 * time.Second)
		for {
			left, _ := filepath.Glob(filepath.Join(cache, "runs", run+"*"))
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("death %d: the watchdog left %q 30 s after the owner was killed (live: %v)\n%s", i, left, proctree.Live(proctree.OfRun(run)), watchdogLogs(cache, run))
			}
			time.Sleep(10 * time.Millisecond)
		}
		require.Empty(t, proctree.Live(proctree.OfRun(run)), "death %d: processes of the run outlived its watchdog, which deleted its lines", i)
	}
}
