//go:build linux

package proctree

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
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
	Ppid       int
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
	var err0, err1, err2, err3 error
	st.Ppid, err0 = strconv.Atoi(f[1])
	st.Pgrp, err1 = strconv.Atoi(f[2])
	st.Session, err2 = strconv.Atoi(f[3])
	st.StartTicks, err3 = strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err0, err1, err2, err3); err != nil {
		return Stat{}, err
	}
	return st, nil
}

// userHZ is the unit of /proc/<pid>/stat's start time: USER_HZ, 100 on
// every architecture Go supports on Linux (reading it needs sysconf, i.e.
// cgo).
const userHZ = 100

// Now is the present on the clock of /proc/<pid>/stat's start times: clock
// ticks since boot, rounded down. A process whose start is less than Now()
// started before this call.
func Now() uint64 {
	var b unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &b); err != nil {
		return 0
	}
	return uint64(b.Nano()) / (1e9 / userHZ)
}

// markOf is the value of EnvMark in pid's environment ("" when it has
// none, or its environment cannot be read: another user's, a kernel
// thread, one a title was written over).
func markOf(pid int) string {
	m, _ := readMark(pid)
	return m
}

// readMark is markOf, and whether the environment read blank (nothing,
// or not at all): a process in the middle of an exec reads so for a
// moment, as do kernel threads and a process started with no
// environment.
func readMark(pid int) (mark string, blank bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil || len(b) == 0 {
		return "", true
	}
	prefix := []byte(EnvMark + "=")
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return string(v), false
		}
	}
	return "", false
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

// marked is a process as a look at /proc saw it: its stat and its mark.
type marked struct {
	pid  int
	mark string
	st   Stat
	// blank: alive, and its environment read blank (readMark), so its
	// mark is unknown rather than absent.
	blank bool
}

// snapshot lists every process /proc shows but this one, zombies
// included (an unreaped leader still holds its group's number).
func snapshot() []marked {
	self := os.Getpid()
	var out []marked
	for _, pid := range pids() {
		if pid == self {
			continue
		}
		st, err := ReadStat(pid)
		if err != nil {
			continue
		}
		m, blank := "", false
		if !st.Zombie() {
			m, blank = readMark(pid)
		}
		out = append(out, marked{pid, m, st, blank})
	}
	return out
}

// scanMarked lists the live processes whose mark want accepts.
func scanMarked(want func(string) bool) []marked {
	var out []marked
	for _, m := range snapshot() {
		if m.mark != "" && want(m.mark) && !m.st.Zombie() {
			out = append(out, m)
		}
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

// Hold opens a pidfd on c's command while the process of pid c.PID is
// still the one that started at c.Ticks: from then on End takes the
// command's leader to be there only while that very process lives, even
// were its pid reused within the tick it started in. A watchdog holds
// each command it is told of, while the owner lives. It reports whether
// it could (false when the command is gone already).
func (c *Command) Hold() bool {
	if c.PID <= 1 || c.leader > 0 {
		return c.leader > 0
	}
	fd, err := unix.PidfdOpen(c.PID, 0)
	if err != nil {
		return false
	}
	if st, err := ReadStat(c.PID); err != nil || st.StartTicks != c.Ticks || exited(fd) {
		unix.Close(fd)
		return false
	}
	c.leader = fd
	return true
}

// Release closes what Hold opened.
func (c *Command) Release() {
	if c.leader > 0 {
		unix.Close(c.leader)
		c.leader = 0
	}
}

// leaderThere reports whether the process of pid c.PID, start m, is the
// command itself: by its pidfd when held (a zombie, or another process
// that took its pid, is not), else by pid and start.
func (c Command) leaderThere(m marked) bool {
	if m.pid != c.PID || m.st.StartTicks != c.Ticks {
		return false
	}
	return c.leader <= 0 || !exited(c.leader)
}

// exited reports whether the process of pidfd fd has ended.
func exited(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// proof is why a process of a snapshot is one of the scope's.
type proof struct {
	marked
	// byMark: it carries an accepted mark (checked again once pinned).
	byMark bool
	// session is the session its command was started in (-1: unknown).
	session int
	// needs are the processes whose still being there, as the snapshot
	// saw them, the proof leans on: the group's anchor, the parents.
	needs []int
	// why says, for a process without the mark, what proved it.
	why string
}

// prove finds, in snap, the processes s proves, and the members of the
// commands' groups that nothing proves. pinned[i] is, in ticks, when
// command i's group was last known to be its own; it is moved on for
// each group proven here.
func (s Scope) prove(snap []marked, pinned []uint64) (proven map[int]proof, unproven []marked) {
	byPID := make(map[int]marked, len(snap))
	for _, m := range snap {
		byPID[m.pid] = m
	}
	proven = map[int]proof{}
	if s.Marks != nil {
		for _, m := range snap {
			if m.mark != "" && s.Marks(m.mark) {
				sid, ok := sessionOfMark(m.mark)
				if !ok {
					sid = -1
				}
				proven[m.pid] = proof{marked: m, byMark: true, session: sid}
			}
		}
	}
	// Groups: a member of the command's group, in its session, is the
	// command's while the group is: while its leader is there (same
	// start), a member carries the command's mark, or a member started
	// while the group's number was pinned. Each such anchor is looked at
	// again after the whole snapshot: it was there throughout.
	type group struct {
		cmd     int
		anchor  int
		members []marked
	}
	var groups []group
	for i, c := range s.Commands {
		if c.PID <= 1 || c.Ticks == 0 {
			continue
		}
		g := group{cmd: i}
		for _, m := range snap {
			if m.st.Pgrp != c.PID || m.st.Session != c.Session {
				continue
			}
			g.members = append(g.members, m)
			switch {
			case g.anchor != 0:
			case c.leaderThere(m),
				m.mark == c.Mark,
				m.pid != c.PID && m.st.StartTicks >= c.Ticks && m.st.StartTicks < pinned[i]:
				g.anchor = m.pid
			}
		}
		groups = append(groups, g)
	}
	now := Now()
	checked := map[int]bool{}
	for _, g := range groups {
		c := s.Commands[g.cmd]
		a, ok := byPID[g.anchor]
		if g.anchor == 0 || !ok || !stillThere(a, c.PID) || a.pid == c.PID && c.leader > 0 && exited(c.leader) {
			for _, m := range g.members {
				if !m.st.Zombie() {
					unproven = append(unproven, m)
				}
			}
			continue
		}
		pinned[g.cmd] = max(pinned[g.cmd], now)
		checked[a.pid] = true
		for _, m := range g.members {
			if _, done := proven[m.pid]; done {
				continue
			}
			proven[m.pid] = proof{marked: m, session: c.Session, needs: []int{a.pid},
				why: "no mark; in the process group of command " + strconv.Itoa(c.PID)}
		}
	}
	// Descent: a child of a proven process that started after it, for as
	// long as that parent is there (its children would have passed to
	// another parent when it exited).
	for grew := true; grew; {
		grew = false
		for _, m := range snap {
			if _, done := proven[m.pid]; done {
				continue
			}
			parent, ok := proven[m.st.Ppid]
			if !ok || parent.st.Zombie() || m.st.StartTicks < parent.st.StartTicks {
				continue
			}
			proven[m.pid] = proof{marked: m, session: parent.session,
				needs: append([]int{parent.pid}, parent.needs...),
				why:   "no mark; started by " + strconv.Itoa(parent.pid) + " (" + parent.st.Comm + ")"}
			grew = true
		}
	}
	// What a proof leans on is looked at once more, now that the snapshot
	// is complete: a parent or an anchor that has gone since proves
	// nothing of this round.
	for pid, pr := range proven {
		for _, n := range pr.needs {
			ok, seen := checked[n]
			if !seen {
				m := byPID[n]
				ok = stillThere(m, -1)
				checked[n] = ok
			}
			if !ok {
				delete(proven, pid)
				break
			}
		}
	}
	unproven = slices.DeleteFunc(unproven, func(m marked) bool { _, ok := proven[m.pid]; return ok })
	return proven, unproven
}

// stillThere reports whether m's pid still names the process the snapshot
// saw (same start; a zombie counts: its number is still held), and, for
// pgrp > 0, whether it is still in group pgrp.
func stillThere(m marked, pgrp int) bool {
	st, err := ReadStat(m.pid)
	return err == nil && st.StartTicks == m.st.StartTicks && (pgrp <= 0 || st.Pgrp == pgrp)
}

// pinned is a process held by a pidfd, checked after opening to still be
// the process that was proven.
type pinned struct {
	marked
	fd  int
	why string // the proof's, for a process without the mark
}

// errMarkUnread: a process proven by its mark did not show it when
// pinned. While a process execs, its environment reads empty for a moment
// (its memory is swapped and the new one not yet laid out), so this is not
// proof that it is gone: End looks at it again.
var errMarkUnread = errors.New("its mark, read when it was found, did not read back when it was pinned (an exec under way, or its pid passed to another process within the same clock tick)")

// pin opens a pidfd on pr and checks, after opening, that the process with
// that pid is alive and still the one proven (same start, and the same
// mark when the mark proved it): the fd is then that process's, and a
// signal through it reaches it or nothing.
func pin(pr proof) (pinned, error) {
	fd, err := unix.PidfdOpen(pr.pid, 0)
	if err != nil {
		return pinned{}, err
	}
	st, err := ReadStat(pr.pid)
	if err != nil || st.Zombie() || st.StartTicks != pr.st.StartTicks {
		unix.Close(fd)
		return pinned{}, errors.New("it ended, or its pid changed hands, while it was being pinned")
	}
	if pr.byMark && markOf(pr.pid) != pr.mark {
		unix.Close(fd)
		return pinned{}, errMarkUnread
	}
	return pinned{marked: pr.marked, fd: fd, why: pr.why}, nil
}

// exited reports whether the pinned process has ended.
func (p pinned) exited() bool { return exited(p.fd) }

func (p pinned) signal(sig syscall.Signal) error {
	return unix.PidfdSendSignal(p.fd, sig, nil, 0)
}

// End ends every live process s proves, from outside the commands' parent
// (a watchdog, a sweep): each is pinned by a pidfd and checked to be the
// process proven before any signal; SIGTERM, up to grace for them to go,
// then SIGKILL. A proven process outside the session its command was
// started in has escaped: reported, and ended only when byHand. Members of
// a command's group that nothing proves are reported, never signalled.
// Nothing in this process's own group is ever signalled.
func End(s Scope, grace time.Duration, byHand bool) Result {
	var res Result
	pinnedUntil := make([]uint64, len(s.Commands))
	for i := range pinnedUntil {
		pinnedUntil[i] = s.PinnedUntil
	}
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		if proven, unproven := s.prove(snapshot(), pinnedUntil); len(proven)+len(unproven) > 0 {
			res.Unproven = fmt.Errorf("no pidfd here (%v; Linux 5.3 and later have them): no process could be proven the test's, so none was signalled", err)
		}
		return res
	} else {
		unix.Close(fd)
	}
	ownGroup := unix.Getpgrp()
	type key struct {
		pid   int
		ticks uint64
	}
	held := map[key]pinned{}
	seen := map[key]bool{}
	// unread: proven by a mark that did not read back when pinned; tried
	// again each round (a snapshot taken in the middle of its exec would
	// not prove it again) until pinned, gone, or the wait is over.
	unread := map[key]proof{}
	var notProven []marked
	defer func() {
		for _, p := range held {
			unix.Close(p.fd)
		}
	}()
	deadline := time.Now().Add(grace)
	killed := false
	// Rounds: a tree may start processes while it ends. Each round proves,
	// pins and signals what is new; the wait ends when every held process
	// is gone, or at grace, when SIGKILL goes to what is left.
	// markSessions: the sessions of the processes proven by their mark.
	// A process of one of them whose mark read blank may be of the scope,
	// caught in an exec (a tree that execs as it ends): End looks again
	// while one is there, up to the end of its wait.
	markSessions := map[int]bool{}
	for round := 0; ; round++ {
		snap := snapshot()
		proven, unproven := s.prove(snap, pinnedUntil)
		for _, pr := range proven {
			if pr.byMark {
				markSessions[pr.st.Session] = true
			}
		}
		for k, pr := range unread {
			if q, ok := proven[k.pid]; !ok {
				proven[k.pid] = pr
			} else if q.st.StartTicks != k.ticks {
				delete(unread, k) // its pid is another process's now
			}
		}
		order := slices.Sorted(maps.Keys(proven))
		for _, pid := range order {
			pr := proven[pid]
			k := key{pid, pr.st.StartTicks}
			if seen[k] {
				continue
			}
			delete(unread, k) // settled here, or put back below
			if pr.st.Zombie() {
				continue
			}
			seen[k] = true
			if pr.session >= 0 && pr.st.Session != pr.session && !byHand {
				why := fmt.Sprintf("left its session %d for session %d", pr.session, pr.st.Session)
				if pr.why != "" {
					why += " (" + pr.why + ")"
				}
				res.Escaped = append(res.Escaped, Proc{PID: pid, Command: pr.st.Comm, Why: why, Marked: pr.byMark})
				continue
			}
			if pr.st.Pgrp == ownGroup {
				res.Left = append(res.Left, Proc{PID: pid, Command: pr.st.Comm, Why: "in the signaller's own process group: never signalled"})
				continue
			}
			p, err := pin(pr)
			if errors.Is(err, errMarkUnread) {
				delete(seen, k)
				unread[k] = pr
				continue
			}
			if err != nil {
				continue // gone already
			}
			held[k] = p
			sig := syscall.SIGTERM
			if killed {
				sig = syscall.SIGKILL
			}
			p.signal(sig)
		}
		notProven = slices.DeleteFunc(unproven, func(m marked) bool { return seen[key{m.pid, m.st.StartTicks}] })
		for k, p := range held {
			if p.exited() {
				res.Ended = append(res.Ended, Proc{PID: k.pid, Command: p.st.Comm, Why: p.why})
				unix.Close(p.fd)
				delete(held, k)
			}
		}
		if len(held) == 0 && len(unread) == 0 && round > 0 && !blankIn(snap, markSessions) {
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
			for k, p := range held {
				res.Left = append(res.Left, Proc{PID: k.pid, Command: p.st.Comm, Why: "still there a second after SIGKILL (uninterruptible sleep?)"})
			}
			for k, pr := range unread {
				res.Left = append(res.Left, Proc{PID: k.pid, Command: pr.st.Comm, Why: errMarkUnread.Error() + ": not signalled", Marked: true})
			}
			break
		}
		time.Sleep(pollEvery)
	}
	for _, m := range notProven {
		res.NotProven = append(res.NotProven, Proc{PID: m.pid, Command: m.st.Comm,
			Why: fmt.Sprintf("in process group %d, session %d, without the mark; nothing proves the group is still the run's command's (its leader and older members are gone): not signalled", m.st.Pgrp, m.st.Session)})
	}
	slices.SortFunc(res.Ended, func(a, b Proc) int { return a.PID - b.PID })
	return res
}

// blankIn reports whether snap holds a live process of one of sessions
// whose mark read blank (not a kernel thread: kthreadd's children).
func blankIn(snap []marked, sessions map[int]bool) bool {
	for _, m := range snap {
		if m.blank && sessions[m.st.Session] && m.pid != 2 && m.st.Ppid != 2 {
			return true
		}
	}
	return false
}

// EndGroup ends process group pgid from the process whose unreaped child
// leads it (the caller must not reap the leader before this returns: its
// zombie is what keeps the group's number from passing to another
// process). SIGTERM to the group, up to grace for its live members to go,
// then SIGKILL. Processes of the command that left the group — with mark,
// or started by one of its processes — are reported as escaped, not
// signalled.
func EndGroup(pgid int, mark string, grace time.Duration) Result {
	var res Result
	if pgid <= 1 || pgid == unix.Getpgrp() {
		res.Unproven = fmt.Errorf("process group %d is this process's own, or not a group: never signalled", pgid)
		return res
	}
	// Before any signal, while their parents are there: what descends
	// from the group (the group itself is pinned: every member is the
	// command's).
	var outside []marked
	if leader, err := ReadStat(pgid); err == nil && leader.Pgrp == pgid {
		sc := Scope{Commands: []Command{{Mark: mark, Session: leader.Session, PID: pgid, Ticks: leader.StartTicks}}}
		if mark != "" {
			sc.Marks = OfMarks(mark)
		}
		proven, _ := sc.prove(snapshot(), []uint64{0})
		for _, pr := range proven {
			if pr.st.Pgrp != pgid && !pr.st.Zombie() {
				outside = append(outside, pr.marked)
			}
		}
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
	escaped := map[int]bool{}
	escape := func(m marked) {
		st, err := ReadStat(m.pid)
		if escaped[m.pid] || err != nil || st.Zombie() || st.StartTicks != m.st.StartTicks || st.Pgrp == pgid {
			return
		}
		escaped[m.pid] = true
		res.Escaped = append(res.Escaped, Proc{PID: m.pid, Command: st.Comm, Why: fmt.Sprintf("left process group %d (session %d now)", pgid, st.Session), Marked: m.mark == mark && mark != ""})
	}
	for _, m := range outside {
		escape(m)
	}
	if mark != "" {
		for _, m := range scanMarked(func(v string) bool { return v == mark }) {
			escape(m)
		}
	}
	slices.SortFunc(res.Escaped, func(a, b Proc) int { return a.PID - b.PID })
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

// held is what Hold keeps of a Command on Linux: a pidfd on the command
// itself (its leader), 0 when none.
type held struct{ leader int }
