//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize-go/e2e/chaos/internal/plan"
)

// owner is one owner process: its plan, what it said, what was done to
// it, and when it died.
type owner struct {
	h    *harness
	plan plan.Owner

	// Set before the process starts, or by its goroutine alone.
	cmd     *exec.Cmd
	pidfd   int
	output  *tail
	trigger chan struct{}

	// Under h.mu.
	pid      int
	spawnAt  time.Time
	exitAt   time.Time
	exitErr  error
	killedAt time.Time // the harness's SIGKILL (or SIGSTOP, for a freeze), just before it
	stopped  time.Time
	dying    time.Time // the owner's own word that it ends itself now
	lastEv   time.Time
	deathLB  time.Time // no later than the instant the process died
	dead     bool      // deathLB is known
	run      string
	events   []event
	procs    map[int]*proc
	// stopEarly: pids the owner said it ends before the harness knew them
	// as its processes, and when.
	stopEarly map[int]time.Time
	keep      []keepUse
	wdKilled  []int
	hadAny    bool      // something of it was there when it died
	goneAt    time.Time // none of its sandboxes, networks, processes left
	clearAt   time.Time // nor any file of its run
	stuck     bool
	outlived  map[int]bool // library processes already reported
	// open are the steps under way that may remove what the owner made
	// (a start that fails releases it, a stop), by index; openEnd is when
	// the last of them ended; ending, when a clean end's cleanups began.
	// Where the backend cannot say who asked for a removal (Kubernetes),
	// they tell the owner's own removals (mayRemoveLocked).
	open    map[int]bool
	openEnd time.Time
	ending  time.Time
	// cleansUp: the owner's word that it ends itself (dying) is one
	// after which its cleanups run: a clean end, a panic in the test.
	cleansUp bool
}

// aliveLocked reports whether the owner may still have lived at at, as
// far as the harness knows.
func (o *owner) aliveLocked(at time.Time) bool {
	return (o.exitAt.IsZero() || !at.After(o.exitAt)) && (!o.dead || at.Before(o.deathLB))
}

// closeStepLocked takes note that step (its index) ended at at.
func (o *owner) closeStepLocked(step string, at time.Time) {
	if n, err := strconv.Atoi(step); err == nil && o.open[n] {
		delete(o.open, n)
		o.openEnd = at
	}
}

// mayRemoveLocked reports whether the owner may have removed something of
// its own at at, by what it said it was doing: inside a step that starts
// or stops something, within ownGrace after one (a watch event is a moment
// behind the call), or ending itself.
func (o *owner) mayRemoveLocked(at time.Time) bool {
	switch {
	case len(o.open) > 0, !o.openEnd.IsZero() && !at.After(o.openEnd.Add(ownGrace)):
		return true
	}
	return o.endingLocked(at)
}

// endingLocked reports whether the owner was ending itself at at: a clean
// end's cleanups, or a panic's.
func (o *owner) endingLocked(at time.Time) bool {
	return o.cleansUp && !at.Before(o.dying) || !o.ending.IsZero() && !at.Before(o.ending)
}

type event struct {
	at   time.Time
	text string
}

// keepUse is a keep-alive sandbox the owner holds from since on.
type keepUse struct {
	name  string
	since time.Time
}

func (h *harness) newOwner(p plan.Owner) *owner {
	o := &owner{h: h, plan: p, pidfd: -1, output: newTail(16 << 10), trigger: make(chan struct{}, 1), procs: map[int]*proc{}}
	h.mu.Lock()
	h.owners = append(h.owners, o)
	h.mu.Unlock()
	return o
}

// event records something of the owner's history (under h.mu).
func (o *owner) eventLocked(at time.Time, format string, a ...any) {
	if len(o.events) < 400 {
		o.events = append(o.events, event{at, fmt.Sprintf(format, a...)})
	}
}

// live runs the owner from its start to its death and what the harness
// learns of it then.
func (o *owner) live(ctx context.Context) {
	h := o.h
	r, w, err := os.Pipe()
	if err != nil {
		h.violate(o, "pipe: "+err.Error())
		return
	}
	args := []string{"-test.run=^TestOwner$", "-test.count=1", "-test.v"}
	if o.plan.Death == plan.Timeout {
		args = append(args, "-test.timeout="+strconv.Itoa(o.plan.TimeoutMillis)+"ms")
	}
	o.cmd = exec.Command(h.owner, args...)
	env := append([]string{}, h.env...)
	env = append(env, o.plan.Env())
	if o.plan.Watchdog != "" {
		env = append(env, "RIGHTSIZE_WATCHDOG="+o.plan.Watchdog)
	}
	if o.plan.Reuse {
		env = append(env, "RIGHTSIZE_REUSE=1")
	}
	o.cmd.Env = env
	o.cmd.ExtraFiles = []*os.File{w}
	o.cmd.Stdout, o.cmd.Stderr = o.output, o.output
	o.cmd.Dir = h.work
	h.mu.Lock()
	o.spawnAt = time.Now()
	err = o.cmd.Start()
	if err == nil {
		o.pid = o.cmd.Process.Pid
		o.eventLocked(o.spawnAt, "spawned as pid %d: %s", o.pid, o.planText())
	}
	h.mu.Unlock()
	w.Close()
	if err != nil {
		r.Close()
		h.violate(o, "the owner could not start: "+err.Error())
		return
	}
	// Not reaped before Wait: the pid is surely this process's.
	if fd, err := unix.PidfdOpen(o.pid, 0); err == nil {
		o.pidfd = fd
		defer unix.Close(fd)
	}
	read := make(chan struct{})
	go func() { defer close(read); o.readEvents(r) }()
	waited := make(chan error, 1)
	go func() { waited <- o.cmd.Wait() }()
	harnessDeath := o.plan.Death == plan.Kill || o.plan.Death == plan.Both || o.plan.Death == plan.Freeze
	deadline := time.NewTimer(h.maxLife)
	defer deadline.Stop()
	var werr error
	done := false
	for !done {
		select {
		case werr = <-waited:
			done = true
		case <-o.trigger:
			if harnessDeath {
				go o.harnessDeath()
			}
		case <-deadline.C:
			h.mu.Lock()
			o.stuck = true
			h.mu.Unlock()
			o.signal(unix.SIGKILL, true)
			h.violate(o, fmt.Sprintf("owner #%d (pid %d) had not died %s after its start: it was stuck, and is killed", o.plan.Index, o.pid, h.maxLife), lastLines(o.output.String(), 30)...)
		case <-ctx.Done():
			o.signal(unix.SIGKILL, true)
		}
	}
	<-read
	r.Close()
	h.mu.Lock()
	o.exitAt, o.exitErr = time.Now(), werr
	o.eventLocked(o.exitAt, "exited: %v", werr)
	o.finishLocked()
	h.mu.Unlock()
}

// harnessDeath is the death the harness inflicts, DelayMicros after the
// planned step began.
func (o *owner) harnessDeath() {
	time.Sleep(time.Duration(o.plan.DelayMicros) * time.Microsecond)
	switch o.plan.Death {
	case plan.Kill:
		o.signal(unix.SIGKILL, true)
	case plan.Both:
		// The watchdogs are still the owner's children: found by their
		// parent and their environment, killed just before the owner.
		wds := watchdogsOf(o.pid)
		now := time.Now()
		o.h.mu.Lock()
		o.killedAt = now
		for _, p := range wds {
			o.h.killed[p.pid] = now
			o.wdKilled = append(o.wdKilled, p.pid)
		}
		o.eventLocked(now, "SIGKILL to its watchdogs %v and to it", pidsOf(wds))
		o.h.mu.Unlock()
		for _, p := range wds {
			p.kill()
		}
		o.signal(unix.SIGKILL, false)
	case plan.Freeze:
		o.signal(unix.SIGSTOP, true)
		time.Sleep(time.Duration(o.plan.FreezeMillis) * time.Millisecond)
		o.signal(unix.SIGKILL, true)
	}
}

// signal sends sig to the owner through its pidfd (never to a pid that
// may have passed to another process); note records the instant as the
// harness's blow.
func (o *owner) signal(sig unix.Signal, note bool) {
	if o.pidfd < 0 {
		return
	}
	now := time.Now()
	if note {
		o.h.mu.Lock()
		if sig == unix.SIGSTOP {
			o.stopped = now
			o.eventLocked(now, "SIGSTOP")
		} else {
			if o.killedAt.IsZero() {
				o.killedAt = now
			}
			o.eventLocked(now, "SIGKILL")
		}
		o.h.mu.Unlock()
	}
	_ = unix.PidfdSendSignal(o.pidfd, sig, nil, 0)
}

// readEvents reads the owner's event lines until its end.
func (o *owner) readEvents(r *os.File) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		at := time.Unix(0, ns)
		o.onEvent(at, f[1], f[2:])
	}
}

func (o *owner) onEvent(at time.Time, ev string, args []string) {
	h := o.h
	h.mu.Lock()
	defer h.mu.Unlock()
	o.lastEv = at
	o.eventLocked(at, "%s %s", ev, strings.Join(args, " "))
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch ev {
	case plan.EvRun:
		h.mapRunLocked(arg(0), o)
	case plan.EvBegin:
		n, _ := strconv.Atoi(arg(0))
		if n == o.plan.AtStep {
			select {
			case o.trigger <- struct{}{}:
			default:
			}
		}
		switch arg(1) {
		case plan.Sandbox, plan.Network, plan.KeepAlive, plan.Stop, plan.GuardAll:
			if o.open == nil {
				o.open = map[int]bool{}
			}
			o.open[n] = true
		case "idle":
			if o.plan.Death == plan.Clean && o.ending.IsZero() {
				o.ending = at
			}
		}
	case plan.EvFail:
		o.closeStepLocked(arg(0), at)
	case plan.EvDone:
		o.closeStepLocked(arg(0), at)
		if arg(1) == plan.Process {
			if pid, err := strconv.Atoi(arg(2)); err == nil {
				h.trackProcessLocked(o, pid, at)
			}
		}
		if arg(1) == plan.Sandbox || arg(1) == plan.GuardAll {
			if run := runOfName(arg(2)); run != "" {
				h.mapRunLocked(run, o)
			}
		}
	case plan.EvAdopted:
		o.keep = append(o.keep, keepUse{name: arg(0), since: at})
	case plan.EvProcStop:
		if pid, err := strconv.Atoi(arg(0)); err == nil {
			switch p := o.procs[pid]; {
			case p == nil:
				// A process started by an async step can be stopped before
				// that step's done (its pid) arrives: trackProcessLocked
				// takes this word then.
				if o.stopEarly == nil {
					o.stopEarly = map[int]time.Time{}
				}
				o.stopEarly[pid] = at
			case p.stopAt.IsZero():
				p.stopAt = at
			}
		}
	case plan.EvDying:
		if o.dying.IsZero() {
			o.dying = at
			o.cleansUp = arg(0) == "end" || arg(0) == plan.Panic
		}
	}
}

// runOfName is the run of a sandbox name rz-<run>-<n>.
func runOfName(name string) string {
	rest, ok := strings.CutPrefix(name, "rz-")
	if !ok || strings.HasPrefix(rest, "reuse-") || strings.HasPrefix(rest, "net-") {
		return ""
	}
	id, _, ok := strings.Cut(rest, "-")
	if !ok || len(id) != 8 {
		return ""
	}
	return id
}

// mapRunLocked ties run to owner o, once.
func (h *harness) mapRunLocked(run string, o *owner) {
	if run == "" {
		return
	}
	if prev := h.byRun[run]; prev != nil && prev != o {
		h.violateLocked(o, fmt.Sprintf("run %s is said to be both owner #%d's and owner #%d's", run, prev.plan.Index, o.plan.Index))
		return
	}
	h.byRun[run] = o
	if o.run == "" {
		o.run = run
	} else if o.run != run {
		h.violateLocked(o, fmt.Sprintf("owner #%d has two runs, %s and %s", o.plan.Index, o.run, run))
	}
}

// finishLocked settles the instant of the owner's death, no later than
// the real one: the harness's blow, the owner's own word, the timeout's
// due time, or its last word; then judges what waited for it.
func (o *owner) finishLocked() {
	var lb time.Time
	switch {
	case !o.killedAt.IsZero():
		lb = o.killedAt
	case !o.dying.IsZero():
		lb = o.dying
	case o.plan.Death == plan.Timeout:
		lb = o.spawnAt.Add(time.Duration(o.plan.TimeoutMillis) * time.Millisecond)
		if !o.lastEv.IsZero() && o.lastEv.After(lb) {
			lb = o.lastEv
		}
	case !o.lastEv.IsZero():
		lb = o.lastEv
	default:
		lb = o.spawnAt
	}
	if lb.After(o.exitAt) {
		lb = o.exitAt
	}
	o.deathLB, o.dead = lb, true
	o.hadAny = o.h.holdsLocked(o)
	o.h.checkPending(false)
}

func (o *owner) planText() string {
	b, _ := json.Marshal(o.plan)
	return string(b)
}

func (o *owner) summary() string {
	o.h.mu.Lock()
	defer o.h.mu.Unlock()
	return fmt.Sprintf("owner #%d pid %d run %s: %s, %d steps, exit %v", o.plan.Index, o.pid, o.run, o.plan.Death, len(o.plan.Steps), o.exitErr)
}

// history is the owner's events, for a violation's report.
func (o *owner) history(start time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  owner #%d (pid %d, run %s), death %s; its events (seconds since the harness's start):\n", o.plan.Index, o.pid, o.run, o.plan.Death)
	for _, e := range o.events {
		fmt.Fprintf(&b, "    %10.6f %s\n", e.at.Sub(start).Seconds(), e.text)
	}
	if !o.deathLB.IsZero() {
		fmt.Fprintf(&b, "    %10.6f (its death, at the latest)\n", o.deathLB.Sub(start).Seconds())
	}
	return b.String()
}

// tail keeps the last n bytes written to it.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.n {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.n {
		b = b[len(b)-t.n:]
	}
	return string(b)
}
