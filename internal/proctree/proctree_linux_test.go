//go:build linux

package proctree_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/proctree"
)

// start starts argv with mark in its environment, in a group of its own
// when ownGroup; it is killed and reaped when the test ends.
func start(t *testing.T, mark string, ownGroup bool, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if mark != "" {
		cmd.Env = append(os.Environ(), proctree.EnvMark+"="+mark)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: ownGroup}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if ownGroup {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	st, err := proctree.ReadStat(pid)
	return err == nil && !st.Zombie()
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	proctest.WaitUntil(t, 10*time.Second, what, cond)
}

func mark(t *testing.T, n int) string {
	return proctree.Mark("t"+strconv.Itoa(os.Getpid()), proctree.Line(uint64(n), proctree.SessionID()))
}

// From outside its parent, every process carrying the mark is ended — the
// command and what it started, in its group — and nothing else.
func TestEndMarkedTree(t *testing.T) {
	m := mark(t, 1)
	tree := start(t, m, true, "/bin/sh", "-c", "sleep 1000 & sleep 1000 & wait")
	other := start(t, mark(t, 2), true, "sleep", "1000")
	waitFor(t, "the tree's two sleeps", func() bool { return len(proctree.Live(proctree.OfMarks(m))) >= 3 })
	members := proctree.Live(proctree.OfMarks(m))

	res := proctree.End(proctree.Scope{Marks: proctree.OfMarks(m)}, time.Second, false)
	require.True(t, res.Clean(), "%+v", res)
	for _, pid := range members {
		require.False(t, alive(pid), "pid %d of the tree is alive", pid)
	}
	require.GreaterOrEqual(t, len(res.Ended), 3)
	require.True(t, alive(other.Process.Pid), "another mark's process was signalled")
	_ = tree
}

// A pid, and a group number, that passed to an unrelated process after
// the marked one was gone is never signalled: the mark is checked through
// a pidfd on the process itself.
func TestEndMarkedNeverSignalsAReusedPid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("forcing a pid's reuse writes /proc/sys/kernel/ns_last_pid: root only")
	}
	m := mark(t, 3)
	first := exec.Command("sleep", "1000")
	first.Env = append(os.Environ(), proctree.EnvMark+"="+m)
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, first.Start())
	pid := first.Process.Pid
	first.Process.Kill()
	first.Wait()

	// The next pid the kernel gives is pid: an unmarked process in a group
	// of its own, with the dead one's pid and group number.
	var reused *exec.Cmd
	for attempt := 0; attempt < 200 && reused == nil; attempt++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot force a pid: %v", err)
		}
		c := exec.Command("sleep", "1000")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, c.Start())
		if c.Process.Pid == pid {
			reused = c
			break
		}
		c.Process.Kill()
		c.Wait()
	}
	if reused == nil {
		t.Skip("the machine took pid " + strconv.Itoa(pid) + " before this test could, 200 times")
	}
	t.Cleanup(func() { reused.Process.Kill(); reused.Wait() })
	st, err := proctree.ReadStat(pid)
	require.NoError(t, err)
	require.Equal(t, pid, st.Pgrp, "the reused pid leads a group of the dead one's number")

	res := proctree.End(proctree.Scope{Marks: proctree.OfMarks(m)}, 200*time.Millisecond, true)
	require.Empty(t, res.Ended, "nothing of the mark lives: nothing is ended")
	require.True(t, alive(pid), "the process that reused pid %d was signalled", pid)
}

// A marked process that left its session is reported as escaped and left
// alone; by hand, it is ended.
func TestEndMarkedEscaped(t *testing.T) {
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid command")
	}
	m := mark(t, 4)
	start(t, m, true, "/bin/sh", "-c", fmt.Sprintf("%s sleep 1000 & sleep 1000 & wait", setsid))
	var escapee int
	waitFor(t, "the escaped sleep", func() bool {
		for _, pid := range proctree.Live(proctree.OfMarks(m)) {
			if st, err := proctree.ReadStat(pid); err == nil && st.Session == pid {
				escapee = pid
				return true
			}
		}
		return false
	})
	t.Cleanup(func() {
		if escapee != 0 { // still the escaped sleep: not ended below
			syscall.Kill(escapee, syscall.SIGKILL)
		}
	})

	res := proctree.End(proctree.Scope{Marks: proctree.OfMarks(m)}, time.Second, false)
	require.Len(t, res.Escaped, 1, "%+v", res)
	require.Equal(t, escapee, res.Escaped[0].PID)
	require.Contains(t, res.Escaped[0].Why, "left its session")
	require.True(t, alive(escapee), "an escaped process was signalled")
	require.False(t, res.Clean())

	res = proctree.End(proctree.Scope{Marks: proctree.OfMarks(m)}, time.Second, true)
	require.True(t, res.Clean(), "%+v", res)
	waitFor(t, "the escaped process to end by hand", func() bool { return !alive(escapee) })
	escapee = 0 // its pid may be another process's from now on
}

// Where the test's session leader is outside its pid namespace (CI jobs in
// containers, `unshare -p`), its session reads 0: an escape is still told.
// The escape test runs again in such a namespace when this machine can
// make one.
func TestEndMarkedEscapedSessionOutsideNamespace(t *testing.T) {
	if proctree.SessionID() == 0 {
		t.Skip("already in such a namespace: TestEndMarkedEscaped is the test")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare to make a pid namespace")
	}
	if out, err := exec.Command(unshare, "-p", "-f", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("this machine makes no pid namespace here (an unprivileged container?): %v: %s", err, out)
	}
	out, err := exec.Command(unshare, "-p", "-f", "--mount-proc", os.Args[0],
		"-test.run", "^TestEndMarkedEscaped$", "-test.v", "-test.count", "1").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: TestEndMarkedEscaped ", "%s", out)
}

// A marked process in the signaller's own group is never signalled.
func TestEndMarkedNeverOwnGroup(t *testing.T) {
	m := mark(t, 5)
	c := start(t, m, false, "sleep", "1000")
	waitFor(t, "the sleep", func() bool { return len(proctree.Live(proctree.OfMarks(m))) == 1 })
	res := proctree.End(proctree.Scope{Marks: proctree.OfMarks(m)}, 200*time.Millisecond, true)
	require.Len(t, res.Left, 1)
	require.Contains(t, res.Left[0].Why, "own process group")
	require.True(t, alive(c.Process.Pid))
}

// From its parent, the command's whole group ends (its zombie pins the
// group's number); a member that left the group is reported as escaped.
func TestEndGroup(t *testing.T) {
	m := mark(t, 6)
	c := exec.Command("/bin/sh", "-c", "trap '' TERM; sleep 1000 & sleep 1000 & wait")
	c.Env = append(os.Environ(), proctree.EnvMark+"="+m)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	waitFor(t, "the group's sleeps", func() bool { return len(proctree.Live(proctree.OfMarks(m))) >= 3 })
	members := proctree.Live(proctree.OfMarks(m))
	start := time.Now()
	res := proctree.EndGroup(c.Process.Pid, m, 300*time.Millisecond)
	require.True(t, res.Clean(), "%+v", res)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "a shell that ignores SIGTERM waits out the grace, then SIGKILL")
	for _, pid := range members {
		require.False(t, alive(pid), "pid %d of the group is alive", pid)
	}
	require.True(t, slices.ContainsFunc(res.Ended, func(p proctree.Proc) bool { return p.PID == c.Process.Pid }))
	require.NotEmpty(t, proctree.EndGroup(syscall.Getpgrp(), "", 0).Unproven, "this process's own group is refused")
}

func TestParseStat(t *testing.T) {
	st, err := proctree.ParseStat([]byte("42 (a (weird) name) S 1 42 42 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 123456 0 0"))
	require.NoError(t, err)
	require.Equal(t, proctree.Stat{State: 'S', Ppid: 1, Pgrp: 42, Session: 42, StartTicks: 123456, Comm: "a (weird) name"}, st)
	_, err = proctree.ParseStat([]byte("garbage"))
	require.Error(t, err)
	pid, ticks, ok := proctree.ParseID("123.456")
	require.True(t, ok)
	require.Equal(t, 123, pid)
	require.Equal(t, uint64(456), ticks)
	_, _, ok = proctree.ParseID("1.2")
	require.False(t, ok, "pid 1 is never a test's")
}

// groupOf lists the live processes of process group pgid.
func groupOf(pgid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := proctree.ReadStat(pid); err == nil && st.Pgrp == pgid && !st.Zombie() {
			out = append(out, pid)
		}
	}
	return out
}

// hasMark reports whether pid's environment holds EnvMark.
func hasMark(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return strings.Contains(string(b), proctree.EnvMark+"=")
}

// lostMarks is a command with two processes that lose the mark: perl
// writing its title over its environment, and one started with `env -i`.
// Both are orphans (double fork): only their group links them to it.
func lostMarks(t *testing.T, then string) string {
	t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("no perl here: the title rewrite needs it")
	}
	return `(perl -e '$0 = "x" x 4096; sleep 1000' &); (env -i sleep 1000 &); ` + then
}

// lostTitle is the command name (15 bytes at most) of lostMarks' perl once
// it has written its title.
var lostTitle = strings.Repeat("x", 15)

// command is what a watchdog is told of c, a command started with mark m.
func command(t *testing.T, c *exec.Cmd, m string) proctree.Command {
	t.Helper()
	st, err := proctree.ReadStat(c.Process.Pid)
	require.NoError(t, err)
	return proctree.Command{Mark: m, Session: st.Session, PID: c.Process.Pid, Ticks: st.StartTicks}
}

// waitLost waits until lostMarks' command, leader of group pgid, has
// settled: the group's live processes are the leader, perl under its new
// title and the `env -i` sleep, those two without the mark. It returns
// the two, and the earliest and the latest of their starts. Counting any
// member that reads no mark would not do: an exiting subshell, or a
// process in the middle of an exec, reads an empty environment for a
// moment, while the env may still carry the mark.
func waitLost(t *testing.T, pgid int) (lost []int, first, last uint64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("group %d to be its leader, a retitled perl and a sleep, those two without the mark", pgid), func() bool {
		g := groupOf(pgid)
		lost, first, last = nil, 0, 0
		var retitled, sleep int
		for _, pid := range g {
			st, err := proctree.ReadStat(pid)
			if err != nil || pid == pgid || hasMark(pid) {
				continue
			}
			switch st.Comm {
			case lostTitle:
				retitled++
			case "sleep":
				sleep++
			default:
				continue
			}
			lost = append(lost, pid)
			if first == 0 || st.StartTicks < first {
				first = st.StartTicks
			}
			last = max(last, st.StartTicks)
		}
		return len(g) == 3 && slices.Contains(g, pgid) && retitled == 1 && sleep == 1
	})
	return lost, first, last
}

// Processes that lost the mark — a title written over the environment, a
// cleared environment — are ended with their command while its leader
// proves the group; the mark and descent alone miss them (their parents
// are gone).
func TestEndCommandGroupWithoutMarks(t *testing.T) {
	m := mark(t, 7)
	c := start(t, m, true, "/bin/sh", "-c", lostMarks(t, "exec sleep 1000"))
	lost, _, _ := waitLost(t, c.Process.Pid)

	res := proctree.End(proctree.Scope{Marks: proctree.OfMarks(m)}, 300*time.Millisecond, false)
	for _, pid := range lost {
		require.True(t, alive(pid), "the mark alone found %d, which has none: %+v", pid, res)
	}

	res = proctree.End(proctree.Scope{Marks: proctree.OfMarks(m), Commands: []proctree.Command{command(t, c, m)}}, time.Second, false)
	require.True(t, res.Clean(), "%+v", res)
	for _, pid := range lost {
		require.False(t, alive(pid), "pid %d of the command's group is alive", pid)
		i := slices.IndexFunc(res.Ended, func(p proctree.Proc) bool { return p.PID == pid })
		require.GreaterOrEqual(t, i, 0, "%+v", res)
		require.Contains(t, res.Ended[i].Why, "process group of command")
	}
}

// When the command itself has gone (and been reaped, as when its owner
// died), its group is proven by the members that started while the owner
// held it unreaped — and only by them: a sweep, which knows no such time,
// reports them and signals nothing. A watchdog holds the command from the
// moment it is told: its pidfd says the command is gone, and the members
// prove the group.
func TestEndPinnedGroupAfterTheLeader(t *testing.T) {
	for _, reaped := range []bool{true, false} {
		t.Run(fmt.Sprintf("reaped %v", reaped), func(t *testing.T) {
			m := mark(t, 8)
			c := exec.Command("/bin/sh", "-c", lostMarks(t, "read x; exit 0"))
			c.Env = append(os.Environ(), proctree.EnvMark+"="+m)
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stdin, err := c.StdinPipe()
			require.NoError(t, err)
			require.NoError(t, c.Start())
			cmd := command(t, c, m)
			t.Cleanup(func() { syscall.Kill(-cmd.PID, syscall.SIGKILL); c.Process.Kill(); c.Wait() })
			lost, first, last := waitLost(t, c.Process.Pid)
			held := cmd
			require.True(t, held.Hold())
			defer held.Release()
			stdin.Close()
			waitFor(t, "the command to exit", func() bool { st, err := proctree.ReadStat(cmd.PID); return err == nil && st.Zombie() })
			// Start ticks are rounded down: a pin that ends in the tick a
			// member started in does not prove it (it may have started
			// after), and nothing is signalled...
			res := proctree.End(proctree.Scope{Marks: proctree.OfMarks(m), Commands: []proctree.Command{held}, PinnedUntil: first}, 200*time.Millisecond, false)
			require.Empty(t, res.Ended, "pinned until the members' first start tick %d: %+v", first, res)
			require.Len(t, res.NotProven, 2, "%+v", res)
			for _, pid := range lost {
				require.True(t, alive(pid), "%d was signalled, though nothing proved it", pid)
			}
			// ... so the owner, which holds the command unreaped, lets the
			// clock pass their last start's tick before it lets go.
			waitFor(t, "the clock to pass the members' last start tick", func() bool { return proctree.Now() > last })
			pinnedUntil := proctree.Now()
			if reaped {
				require.NoError(t, c.Wait())
				res := proctree.End(proctree.Scope{Marks: proctree.OfMarks(m), Commands: []proctree.Command{cmd}}, 200*time.Millisecond, true)
				require.Empty(t, res.Ended, "%+v", res)
				require.Len(t, res.NotProven, 2, "%+v", res)
				require.Contains(t, res.NotProven[0].Why, "nothing proves")
				require.False(t, res.Clean())
				for _, pid := range lost {
					require.True(t, alive(pid), "%d was signalled, though nothing proved it", pid)
				}
			}
			// Not reaped yet: the command's zombie, which its held pidfd
			// says is gone, proves nothing, and the members still do.
			res = proctree.End(proctree.Scope{Marks: proctree.OfMarks(m), Commands: []proctree.Command{held}, PinnedUntil: pinnedUntil}, time.Second, false)
			require.True(t, res.Clean(), "%+v", res)
			for _, pid := range lost {
				require.False(t, alive(pid), "pid %d of the command's group is alive", pid)
			}
		})
	}
}

// A child that left the command's group and session without the mark
// (`env -i setsid`) is proven by descent while its parent lives: reported
// as escaped and left alone; by hand, ended. The parent's own Stop
// reports it too.
func TestEndEscapedWithoutMark(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid command")
	}
	for _, how := range []string{"reported", "by hand", "by its parent"} {
		t.Run(how, func(t *testing.T) {
			m := mark(t, 9)
			c := start(t, m, true, "/bin/sh", "-c", "env -i setsid sleep 1000 & sleep 1000 & wait")
			var escapee int
			waitFor(t, "the escaped sleep", func() bool {
				for _, pid := range pids(t) {
					if st, err := proctree.ReadStat(pid); err == nil && st.Ppid == c.Process.Pid && st.Session == pid {
						escapee = pid
						return !hasMark(pid)
					}
				}
				return false
			})
			t.Cleanup(func() {
				if escapee != 0 { // still the escaped sleep: not ended by hand
					syscall.Kill(escapee, syscall.SIGKILL)
				}
			})
			scope := proctree.Scope{Marks: proctree.OfMarks(m), Commands: []proctree.Command{command(t, c, m)}}
			var res proctree.Result
			switch how {
			case "by hand":
				res = proctree.End(scope, time.Second, true)
				require.True(t, res.Clean(), "%+v", res)
				waitFor(t, "the escaped process to end by hand", func() bool { return !alive(escapee) })
				escapee = 0 // its pid may be another process's from now on
				return
			case "by its parent":
				res = proctree.EndGroup(c.Process.Pid, m, time.Second)
			default:
				res = proctree.End(scope, time.Second, false)
				require.Contains(t, res.Escaped[0].Why, "started by")
			}
			require.Len(t, res.Escaped, 1, "%+v", res)
			require.Equal(t, escapee, res.Escaped[0].PID)
			require.True(t, alive(escapee), "an escaped process was signalled")
		})
	}
}

// pids lists the processes /proc shows.
func pids(t *testing.T) []int {
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// A command's group number that passed to an unrelated group (the command
// and its group gone, the pid reused) is never taken for the command's:
// not its leader (another start), no mark, and its members started after
// the owner last held the command.
func TestEndNeverSignalsAReusedGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("forcing a pid's reuse writes /proc/sys/kernel/ns_last_pid: root only")
	}
	m := mark(t, 10)
	first := exec.Command("sleep", "1000")
	first.Env = append(os.Environ(), proctree.EnvMark+"="+m)
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, first.Start())
	cmd := command(t, first, m)
	held := cmd
	require.True(t, held.Hold())
	defer held.Release()
	first.Process.Kill()
	first.Wait()
	pinnedUntil := proctree.Now()
	pid := cmd.PID
	// By pid and start alone (a sweep), a pid reused within the tick its
	// first process started in cannot be told from it: let the tick pass.
	waitFor(t, "the clock to pass the first start's tick", func() bool { return proctree.Now() > cmd.Ticks })

	var reused *exec.Cmd
	for attempt := 0; attempt < 200 && reused == nil; attempt++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot force a pid: %v", err)
		}
		c := exec.Command("/bin/sh", "-c", "sleep 1000 & exec sleep 1000")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, c.Start())
		if c.Process.Pid == pid {
			reused = c
			break
		}
		// The group, not the shell alone: its background sleep would
		// outlive it. c, unreaped, keeps the group's number its own.
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		c.Wait()
	}
	if reused == nil {
		t.Skip("the machine took pid " + strconv.Itoa(pid) + " before this test could, 200 times")
	}
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL); reused.Wait() })
	waitFor(t, "the reused group's two sleeps", func() bool { return len(groupOf(pid)) == 2 })

	// Were the reuse in the same tick, the held pidfd still tells them
	// apart: it is the first process's, which is gone.
	st, err := proctree.ReadStat(pid)
	require.NoError(t, err)
	sameTick := held
	sameTick.Ticks = st.StartTicks
	for _, sc := range []proctree.Scope{
		{Marks: proctree.OfMarks(m), Commands: []proctree.Command{cmd}},                                // a sweep
		{Marks: proctree.OfMarks(m), Commands: []proctree.Command{held}, PinnedUntil: pinnedUntil},     // a watchdog
		{Marks: proctree.OfMarks(m), Commands: []proctree.Command{sameTick}, PinnedUntil: pinnedUntil}, // the same, had the tick been one
	} {
		res := proctree.End(sc, 200*time.Millisecond, true)
		require.Empty(t, res.Ended, "pinned until %d: %+v", sc.PinnedUntil, res)
		require.Len(t, res.NotProven, 2, "pinned until %d: %+v", sc.PinnedUntil, res)
		require.Len(t, groupOf(pid), 2, "pinned until %d: the group that reused number %d was signalled", sc.PinnedUntil, pid)
	}
}

func TestParseLine(t *testing.T) {
	c, ok := proctree.ParseLine("abc", proctree.Started(proctree.Line(3, 42), proctree.ID(4567, 890)))
	require.True(t, ok)
	require.Equal(t, proctree.Command{Mark: "abc.p3.42", Session: 42, PID: 4567, Ticks: 890}, c)
	c, ok = proctree.ParseLine("abc", proctree.Line(3, 0))
	require.True(t, ok)
	require.Equal(t, proctree.Command{Mark: "abc.p3.0", Session: 0}, c)
	for _, bad := range []string{"", "p3", "p3.42.4567", "p3.42.1.890", "x3.42", "p3.-1", "p3.42.4567.+8", "p.42", "p3.42.4567.890.1"} {
		_, ok := proctree.ParseLine("abc", bad)
		require.False(t, ok, bad)
	}
}

// Marked processes caught in an exec are ended all the same. While a
// process execs, its environment reads empty for a moment (the kernel has
// swapped its memory and not yet laid out the new one's): a process proven
// by its mark, then found without it when pinned, is looked at again in a
// later round rather than taken for gone. Here a tree of processes exec
// themselves over and over, as `sh -c '… & exec sleep 1000'` does once,
// while End ends them.
func TestEndMarkedWhileTheyExec(t *testing.T) {
	dir := t.TempDir()
	reexec := filepath.Join(dir, "reexec.sh")
	require.NoError(t, os.WriteFile(reexec, []byte("[ \"$1\" -gt 0 ] && exec /bin/sh \"$0\" $(($1 - 1))\nexec sleep 1000\n"), 0o600))
	tree := fmt.Sprintf("for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do /bin/sh %[1]s 100000 & done; exec /bin/sh %[1]s 100000", reexec)
	for i := range 25 {
		m := mark(t, 100+i)
		start(t, m, true, "/bin/sh", "-c", tree)
		waitFor(t, "the tree", func() bool { return len(proctree.Live(proctree.OfMarks(m))) >= 10 })
		res := proctree.End(proctree.Scope{Marks: proctree.OfMarks(m)}, time.Second, false)
		if live := proctree.Live(proctree.OfMarks(m)); len(live) > 0 {
			t.Fatalf("round %d: End left %v, and said %+v", i, live, res)
		}
		require.True(t, res.Clean(), "%+v", res)
	}
}
