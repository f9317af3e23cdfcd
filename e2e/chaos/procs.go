//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// proc is a local process an owner started (StartProcess), watched
// through a pidfd: its end is seen as it happens, never polled.
type proc struct {
	pid    int
	owner  *owner
	fd     int
	since  time.Time
	stopAt time.Time // the owner said it ends it itself
	exitAt time.Time // seen ended
	judged bool
}

// epoll over every watched pidfd, in one goroutine (watchProcesses).
var pidfds struct {
	sync.Mutex
	ep    int
	byFD  map[int]*proc
	ready bool
}

func initPidfds() error {
	pidfds.Lock()
	defer pidfds.Unlock()
	if pidfds.ready {
		return nil
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	pidfds.ep, pidfds.byFD, pidfds.ready = ep, map[int]*proc{}, true
	return nil
}

// ourEnv is the environment entry every process of this run carries.
func (h *harness) ourEnv() string { return "RIGHTSIZE_CACHE_DIR=" + h.cache }

// trackProcessLocked starts watching process pid of owner o, once it is
// proven the owner's (its environment carries the run's cache dir and a
// process mark).
func (h *harness) trackProcessLocked(o *owner, pid int, at time.Time) {
	if o.procs[pid] != nil {
		return
	}
	if err := initPidfds(); err != nil {
		h.notes["epoll: "+err.Error()]++
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		h.notes["a process was gone before it could be watched"]++
		return
	}
	env := readEnviron(pid)
	if !hasEntry(env, h.ourEnv()) || !hasPrefix(env, "RIGHTSIZE_PROCESS=") {
		unix.Close(fd)
		h.notes["a process could not be proven the owner's before it ended"]++
		return
	}
	p := &proc{pid: pid, owner: o, fd: fd, since: at, stopAt: o.stopEarly[pid]}
	delete(o.stopEarly, pid) // taken once: a pid used again is another process
	o.procs[pid] = p
	pidfds.Lock()
	pidfds.byFD[fd] = p
	pidfds.Unlock()
	if err := unix.EpollCtl(pidfds.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		h.notes["epoll_ctl: "+err.Error()]++
	}
}

// watchProcesses takes note of each watched process's end, and every
// half second looks over the run's processes in /proc.
func (h *harness) watchProcesses(ctx context.Context) {
	if err := initPidfds(); err != nil {
		h.note("epoll: " + err.Error())
		return
	}
	evs := make([]unix.EpollEvent, 64)
	lastScan := time.Time{}
	for ctx.Err() == nil {
		n, err := unix.EpollWait(pidfds.ep, evs, 50)
		now := time.Now()
		if err != nil && err != unix.EINTR {
			h.note("epoll_wait: " + err.Error())
			return
		}
		for _, ev := range evs[:max(n, 0)] {
			fd := int(ev.Fd)
			pidfds.Lock()
			p := pidfds.byFD[fd]
			delete(pidfds.byFD, fd)
			pidfds.Unlock()
			_ = unix.EpollCtl(pidfds.ep, unix.EPOLL_CTL_DEL, fd, nil)
			unix.Close(fd)
			if p == nil {
				continue
			}
			h.mu.Lock()
			p.exitAt = now
			p.owner.eventLocked(now, "process %d seen ended", p.pid)
			h.judgeProcessLocked(p)
			h.mu.Unlock()
		}
		if now.Sub(lastScan) > 500*time.Millisecond {
			lastScan = now
			h.scanLibrary(now)
		}
	}
}

// judgeProcessLocked: a process of the owner's that ended while the owner
// lived, and that the owner had not said it ends itself, was ended by
// someone else. Judged once the owner is dead, when all it said is known.
func (h *harness) judgeProcessLocked(p *proc) {
	o := p.owner
	if p.judged || p.exitAt.IsZero() || !o.dead {
		return
	}
	p.judged = true
	if !p.stopAt.IsZero() && !p.exitAt.Before(p.stopAt) {
		return
	}
	if p.exitAt.Before(o.deathLB) {
		h.violateLocked(o, fmt.Sprintf("process %d of owner #%d (run %s) ended at %s, while its owner lived (its death came at %s or later), and its owner had not ended it",
			p.pid, o.plan.Index, o.run, stamp(p.exitAt, h.start), stamp(o.deathLB, h.start)))
	}
}

// libProc is a process of this run found in /proc.
type libProc struct {
	pid, ppid int
	role      string // "owner", "watchdog", "process", "other"
	run       string
	args      string
}

func (p libProc) String() string {
	return fmt.Sprintf("pid %d (%s of run %s, parent %d): %s", p.pid, p.role, p.run, p.ppid, p.args)
}

// kill SIGKILLs the process through a pidfd, once it is proven still the
// one found.
func (p libProc) kill() {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if !hasEntry(readEnviron(p.pid), "RIGHTSIZE_NATIVE_WATCHDOG=1") {
		return
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}

func pidsOf(ps []libProc) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.pid)
	}
	return out
}

// ours lists the processes whose environment carries this run's cache
// dir: every owner, watchdog and process the run made.
func (h *harness) ours() []libProc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := h.ourEnv()
	var out []libProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env := readEnviron(pid)
		if !hasEntry(env, want) {
			continue
		}
		out = append(out, describeProc(pid, env))
	}
	return out
}

func describeProc(pid int, env [][]byte) libProc {
	p := libProc{pid: pid, role: "other", ppid: ppidOf(pid)}
	// A watchdog and a process inherit the owner's plan: their own marks
	// come first.
	switch {
	case hasEntry(env, "RIGHTSIZE_NATIVE_WATCHDOG=1"):
		p.role = "watchdog"
		p.run = valueOf(env, "RIGHTSIZE_NATIVE_WATCHDOG_RUN=")
	case hasPrefix(env, "RIGHTSIZE_PROCESS="):
		p.role = "process"
		p.run, _, _ = strings.Cut(valueOf(env, "RIGHTSIZE_PROCESS="), ".")
	case hasPrefix(env, "RZ_CHAOS_OWNER="):
		p.role = "owner"
	}
	if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); err == nil {
		p.args = strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		if len(p.args) > 160 {
			p.args = p.args[:160] + "…"
		}
	}
	return p
}

// watchdogsOf lists the watchdogs owner pid spawned that still run: its
// children until it dies.
func watchdogsOf(pid int) []libProc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []libProc
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || ppidOf(p) != pid {
			continue
		}
		env := readEnviron(p)
		if hasEntry(env, "RIGHTSIZE_NATIVE_WATCHDOG=1") {
			out = append(out, describeProc(p, env))
		}
	}
	return out
}

// seenWatchdogs remembers the watchdogs seen, by pid, for reports.
type seenWatchdogs struct {
	sync.Mutex
	m map[int]string
}

var watchdogs = &seenWatchdogs{m: map[int]string{}}

func (w *seenWatchdogs) get(pid int) (string, bool) {
	w.Lock()
	defer w.Unlock()
	r, ok := w.m[pid]
	return r, ok
}

// scanLibrary looks over the run's processes: a watchdog or a local
// process whose owner died long ago has outlived its purpose.
func (h *harness) scanLibrary(now time.Time) {
	ps := h.ours()
	watchdogs.Lock()
	for _, p := range ps {
		if p.role == "watchdog" {
			watchdogs.m[p.pid] = p.run
		}
	}
	watchdogs.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range ps {
		if p.role != "watchdog" && p.role != "process" {
			continue
		}
		o := h.byRun[p.run]
		if o == nil || !o.dead || o.plan.Death == "both" && p.role == "process" {
			continue
		}
		if o.outlived == nil {
			o.outlived = map[int]bool{}
		}
		if o.outlived[p.pid] {
			continue
		}
		if age := now.Sub(o.deathLB); age > h.eng.outlive {
			o.outlived[p.pid] = true
			h.violateLocked(o, fmt.Sprintf("%s still runs %s after its owner #%d died", p, age.Round(time.Millisecond), o.plan.Index))
		}
	}
}

func readEnviron(pid int) [][]byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil
	}
	return bytes.Split(b, []byte{0})
}

func hasEntry(env [][]byte, kv string) bool {
	for _, e := range env {
		if string(e) == kv {
			return true
		}
	}
	return false
}

func hasPrefix(env [][]byte, p string) bool {
	for _, e := range env {
		if bytes.HasPrefix(e, []byte(p)) {
			return true
		}
	}
	return false
}

func valueOf(env [][]byte, p string) string {
	for _, e := range env {
		if v, ok := bytes.CutPrefix(e, []byte(p)); ok {
			return string(v)
		}
	}
	return ""
}

func ppidOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return -1
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// stamp is t as seconds since the harness's start.
func stamp(t, start time.Time) string {
	return fmt.Sprintf("%.6fs", t.Sub(start).Seconds())
}
