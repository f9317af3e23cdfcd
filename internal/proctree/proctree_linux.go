//go:build linux

package proctree

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Stat is what /proc/<pid>/stat says of a process.
type Stat struct {
	State      byte
	Pgrp       int
	Session    int
	StartTicks uint64
	Comm       string
}

// Zombie reports whether the process has exited (and waits to be reaped).
func (s Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' }

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// ParseStat parses a /proc/<pid>/stat line. The command name (field 2) may
// hold spaces and parentheses, so fields are counted from after its last
// ')'.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	i := bytes.LastIndexByte(b, ')')
	if open < 0 || i < open {
		return Stat{}, errors.New("no command name in parentheses")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	st := Stat{State: f[0][0], Comm: string(b[open+1 : i])}
	var err1, err2, err3 error
	st.Pgrp, err1 = strconv.Atoi(f[2])
	st.Session, err2 = strconv.Atoi(f[3])
	st.StartTicks, err3 = strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Stat{}, err
	}
	return st, nil
}

// markOf is the value of EnvMark in pid's environment ("" when it has
// none, or its environment cannot be read: another user's, a kernel
// thread).
func markOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ""
	}
	prefix := []byte(EnvMark + "=")
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return string(v)
		}
	}
	return ""
}

// pids lists the processes /proc shows.
func pids() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 1 {
			out = append(out, pid)
		}
	}
	return out
}

// marked is a live process carrying one of the wanted marks.
type marked struct {
	pid  int
	mark string
	st   Stat
}

// scanMarked lists the live processes whose mark want accepts.
func scanMarked(want func(string) bool) []marked {
	self := os.Getpid()
	var out []marked
	for _, pid := range pids() {
		if pid == self {
			continue
		}
		m := markOf(pid)
		if m == "" || !want(m) {
			continue
		}
		st, err := ReadStat(pid)
		if err != nil || st.Zombie() {
			continue
		}
		out = append(out, marked{pid, m, st})
	}
	return out
}

// sessionOfMark is the session the mark's command was started in: the
// mark's last field, and whether it has one. Session 0 is a real answer:
// the starter's session leader was outside its pid namespace (a test run
// in a container, in `unshare -p`), and the processes that stay in that
// session read 0 there too, while one that calls setsid reads its own pid.
func sessionOfMark(mark string) (int, bool) {
	i := strings.LastIndexByte(mark, '.')
	if i < 0 {
		return 0, false
	}
	sid, err := strconv.Atoi(mark[i+1:])
	return sid, err == nil && sid >= 0
}

// pinned is a process held by a pidfd, checked after opening to still be
// the marked process that was listed.
type pinned struct {
	marked
	fd int
}

// pin opens a pidfd on m and checks, after opening, that the process with
// that pid still carries m's mark and is alive: the fd is then that
// process's, and a signal through it reaches it or nothing.
func pin(m marked) (pinned, error) {
	fd, err := unix.PidfdOpen(m.pid, 0)
	if err != nil {
		return pinned{}, err
	}
	st, err := ReadStat(m.pid)
	if err != nil || st.Zombie() || markOf(m.pid) != m.mark || st.StartTicks != m.st.StartTicks {
		unix.Close(fd)
		return pinned{}, errors.New("it ended, or its pid changed hands, while it was being pinned")
	}
	return pinned{marked: m, fd: fd}, nil
}

// exited reports whether the pinned process has ended.
func (p pinned) exited() bool {
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

func (p pinned) signal(sig syscall.Signal) error {
	return unix.PidfdSendSignal(p.fd, sig, nil, 0)
}

// EndMarked ends every live process whose mark want accepts, from outside
// its parent (a watchdog, a sweep): each is pinned by a pidfd and checked
// to carry its mark before any signal; SIGTERM, up to grace for them to
// go, then SIGKILL. A marked process outside the session its command was
// started in has escaped: reported, and ended only when byHand. Nothing
// in this process's own group is ever signalled.
func EndMarked(want func(string) bool, grace time.Duration, byHand bool) Result {
	var res Result
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		if len(scanMarked(want)) > 0 {
			res.Unproven = fmt.Errorf("no pidfd here (%v; Linux 5.3 and later have them): no process could be proven the test's, so none was signalled", err)
		}
		return res
	} else {
		unix.Close(fd)
	}
	ownGroup := unix.Getpgrp()
	held := map[int]pinned{}
	seen := map[int]bool{}
	defer func() {
		for _, p := range held {
			unix.Close(p.fd)
		}
	}()
	deadline := time.Now().Add(grace)
	killed := false
	// Rounds: a tree may start processes while it ends. Each round pins
	// and signals what is new; the wait ends when every held process is
	// gone, or at grace, when SIGKILL goes to what is left.
	for round := 0; ; round++ {
		for _, m := range scanMarked(want) {
			if seen[m.pid] {
				continue
			}
			seen[m.pid] = true
			if sid, ok := sessionOfMark(m.mark); ok && m.st.Session != sid && !byHand {
				res.Escaped = append(res.Escaped, Proc{PID: m.pid, Command: m.st.Comm, Why: fmt.Sprintf("left its session %d for session %d", sid, m.st.Session)})
				continue
			}
			if m.st.Pgrp == ownGroup {
				res.Left = append(res.Left, Proc{PID: m.pid, Command: m.st.Comm, Why: "in the signaller's own process group: never signalled"})
				continue
			}
			p, err := pin(m)
			if err != nil {
				continue // gone already
			}
			held[m.pid] = p
			sig := syscall.SIGTERM
			if killed {
				sig = syscall.SIGKILL
			}
			p.signal(sig)
		}
		for pid, p := range held {
			if p.exited() {
				res.Ended = append(res.Ended, Proc{PID: pid, Command: p.st.Comm})
				unix.Close(p.fd)
				delete(held, pid)
			}
		}
		if len(held) == 0 && round > 0 {
			break
		}
		now := time.Now()
		if !killed && now.After(deadline) {
			killed = true
			for _, p := range held {
				p.signal(syscall.SIGKILL)
			}
			deadline = now.Add(time.Second)
		} else if killed && now.After(deadline) {
			for pid, p := range held {
				res.Left = append(res.Left, Proc{PID: pid, Command: p.st.Comm, Why: "still there a second after SIGKILL (uninterruptible sleep?)"})
			}
			break
		}
		time.Sleep(pollEvery)
	}
	slices.SortFunc(res.Ended, func(a, b Proc) int { return a.PID - b.PID })
	return res
}

// EndGroup ends process group pgid from the process whose unreaped child
// leads it (the caller must not reap the leader before this returns: its
// zombie is what keeps the group's number from passing to another
// process). SIGTERM to the group, up to grace for its live members to go,
// then SIGKILL. Processes with mark that left the group are reported as
// escaped, not signalled.
func EndGroup(pgid int, mark string, grace time.Duration) Result {
	var res Result
	if pgid <= 1 || pgid == unix.Getpgrp() {
		res.Unproven = fmt.Errorf("process group %d is this process's own, or not a group: never signalled", pgid)
		return res
	}
	members := liveMembers(pgid)
	if len(members) > 0 {
		unix.Kill(-pgid, unix.SIGTERM)
		deadline := time.Now().Add(grace)
		for len(liveMembers(pgid)) > 0 && time.Now().Before(deadline) {
			time.Sleep(pollEvery)
		}
		if len(liveMembers(pgid)) > 0 {
			unix.Kill(-pgid, unix.SIGKILL)
			deadline = time.Now().Add(time.Second)
			for len(liveMembers(pgid)) > 0 && time.Now().Before(deadline) {
				time.Sleep(pollEvery)
			}
		}
	}
	left := map[int]bool{}
	for _, m := range liveMembers(pgid) {
		left[m.pid] = true
		res.Left = append(res.Left, Proc{PID: m.pid, Command: m.st.Comm, Why: "still there a second after SIGKILL"})
	}
	for _, m := range members {
		if !left[m.pid] {
			res.Ended = append(res.Ended, Proc{PID: m.pid, Command: m.st.Comm})
		}
	}
	if mark != "" {
		for _, m := range scanMarked(func(v string) bool { return v == mark }) {
			if m.st.Pgrp != pgid {
				res.Escaped = append(res.Escaped, Proc{PID: m.pid, Command: m.st.Comm, Why: fmt.Sprintf("left process group %d (session %d now)", pgid, m.st.Session)})
			}
		}
	}
	return res
}

// liveMembers lists the live processes of group pgid.
func liveMembers(pgid int) []marked {
	var out []marked
	for _, pid := range pids() {
		st, err := ReadStat(pid)
		if err != nil || st.Pgrp != pgid || st.Zombie() {
			continue
		}
		out = append(out, marked{pid: pid, st: st})
	}
	return out
}

// Live lists the live processes whose mark want accepts, as pids.
func Live(want func(string) bool) []int {
	var out []int
	for _, m := range scanMarked(want) {
		out = append(out, m.pid)
	}
	return out
}
