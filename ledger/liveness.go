package ledger

import (
	"fmt"
	"runtime"
	"time"

	"github.com/rightsize/rightsize-go/internal/isotime"
	"github.com/rightsize/rightsize-go/internal/procid"
)

// A State is the answer to "is the owner of this record alive?": alive,
// dead, or unknown. Nothing of an Unknown or Alive run is ever removed.
type State int

const (
	// Unknown: the owner's liveness cannot be judged from this process (it
	// lives in another pid namespace, or its pid could not be looked up).
	// Nothing of an Unknown run is ever removed. It is the zero value.
	Unknown State = iota
	// Alive: a process with the recorded pid runs and is the owner, or may
	// be (its start time is unknown).
	Alive
	// Dead: no process is the owner any more.
	Dead
)

func (s State) String() string {
	switch s {
	case Alive:
		return "alive"
	case Dead:
		return "dead"
	default:
		return "unknown"
	}
}

// A Liveness is a judgement of a run's owner ([Judge]) with the reason for
// it, meant to be shown to a user as it is.
type Liveness struct {
	State  State
	Reason string
}

func (l Liveness) String() string { return l.State.String() + ": " + l.Reason }

// StartWindow is how far apart a live pid's start time and a record's
// startedIso may be for the pid to be the owner: 2000 ms apart is alive,
// 2001 ms is dead. It covers writers that record whole seconds. Records
// written by rightsize-go in the same boot compare raw start ticks
// ([Record].StartTicks) instead, exactly.
const StartWindow = 2000 * time.Millisecond

// ticksNeedSameBoot: Linux start ticks count from boot, so they compare only
// within one boot; macOS and Windows record absolute instants.
const ticksNeedSameBoot = runtime.GOOS == "linux"

// Judge says whether the owner of r is alive, dead, or cannot be judged
// from this process, with the reason. A record of another boot is dead; a
// pid that runs with another start than the recorded one (beyond
// [StartWindow], or other ticks) is dead; a pid that runs where the start
// was not recorded is alive; a pid in a pid namespace this process cannot
// look into is unknown.
func Judge(r Record) Liveness {
	me, _ := procid.Self()
	return judge(r, me, host{lookup: procid.Proc, boot: procid.BootTime(), initial: procid.InInitialPidNamespace(), inNamespace: procid.InNamespace})
}

// host is what a judgement needs to know of the machine, replaced in tests.
type host struct {
	lookup func(int) (procid.State, error)
	boot   time.Time
	// initial: this process is in the host's own pid namespace, where
	// every process is visible.
	initial bool
	// inNamespace looks a pid up in another pid namespace, from the
	// initial one; nsLive is false when the namespace has no process left.
	inNamespace func(ns string, pid int) (st procid.State, nsLive bool, err error)
}

func judge(r Record, me procid.Identity, h host) Liveness {
	if r.BootID != "" && me.BootID != "" && r.BootID != me.BootID {
		return Liveness{Dead, fmt.Sprintf("recorded in another boot (boot id %s; this boot is %s)", r.BootID, me.BootID)}
	}
	lookup := h.lookup
	switch {
	case r.PidNamespace == "" && me.PidNamespace != "" && !h.initial:
		// The other members record no namespace: their pid is numbered in
		// a namespace this process cannot name. Looking it up here would
		// find another process, or none, and call a live owner dead.
		return Liveness{Unknown, fmt.Sprintf("the record names no pid namespace (%s) and this process runs in pid namespace %s, not the host's: pid %d cannot be looked up from here; sweep from the host",
			writerName(r), me.PidNamespace, r.PID)}
	case r.PidNamespace != "" && me.PidNamespace != "" && r.PidNamespace != me.PidNamespace:
		if !h.initial {
			return Liveness{Unknown, fmt.Sprintf("pid %d belongs to pid namespace %s and this process is in %s: it cannot be looked up from here", r.PID, r.PidNamespace, me.PidNamespace)}
		}
		st, live, err := h.inNamespace(r.PidNamespace, r.PID)
		switch {
		case err != nil:
			return Liveness{Unknown, fmt.Sprintf("pid %d of pid namespace %s cannot be looked up: %v", r.PID, r.PidNamespace, err)}
		case !live:
			return Liveness{Dead, fmt.Sprintf("no process is left in pid namespace %s, where pid %d ran", r.PidNamespace, r.PID)}
		}
		// The kernel gives a freed namespace's number to the next one
		// made: on a busy machine (a container's start makes several)
		// the number soon names another namespace. Its first process,
		// which lives as long as it does, then started after the owner.
		if init, _, err := h.inNamespace(r.PidNamespace, 1); err == nil && init.Exists && startedAfter(init, r, me) {
			return Liveness{Dead, fmt.Sprintf("no process is left in pid namespace %s, where pid %d ran: its number now names a newer namespace, whose first process started after the owner", r.PidNamespace, r.PID)}
		}
		lookup = func(int) (procid.State, error) { return st, nil }
	}
	started, err := r.Started()
	if err != nil {
		return Liveness{Unknown, err.Error()}
	}
	if !started.IsZero() && !h.boot.IsZero() && started.Before(h.boot.Add(-StartWindow)) {
		return Liveness{Dead, fmt.Sprintf("started %s, before this boot (%s)", r.StartedISO, isotime.Format(h.boot))}
	}
	st, err := lookup(r.PID)
	if err != nil {
		return Liveness{Unknown, fmt.Sprintf("cannot look up pid %d: %v", r.PID, err)}
	}
	if !st.Exists {
		return Liveness{Dead, fmt.Sprintf("no process has pid %d", r.PID)}
	}
	if st.Exited {
		return Liveness{Dead, fmt.Sprintf("pid %d has exited (its parent has not reaped it yet)", r.PID)}
	}
	if r.StartTicks != 0 && st.Ticks != 0 && ticksCompare(r, me) {
		if st.Ticks == r.StartTicks {
			return Liveness{Alive, fmt.Sprintf("pid %d runs with the recorded start (%d)", r.PID, r.StartTicks)}
		}
		return Liveness{Dead, fmt.Sprintf("pid %d was reused: it started at %d, the owner at %d", r.PID, st.Ticks, r.StartTicks)}
	}
	if started.IsZero() && r.StartedISO != "" {
		return Liveness{Alive, fmt.Sprintf("pid %d runs and the record's start is the epoch (%s), which the Kotlin member writes when it cannot read its own: unknown, so taken to be the owner", r.PID, r.StartedISO)}
	}
	if started.IsZero() {
		return Liveness{Alive, fmt.Sprintf("pid %d runs and the record has no start time: taken to be the owner", r.PID)}
	}
	if st.Start.IsZero() {
		return Liveness{Alive, fmt.Sprintf("pid %d runs and its start time is unknown (%s): taken to be the owner", r.PID, st.Unknown)}
	}
	d := st.Start.Sub(started)
	if d < 0 {
		d = -d
	}
	if d > StartWindow {
		return Liveness{Dead, fmt.Sprintf("pid %d was reused: it started %s, the owner %s (%s apart)", r.PID, isotime.Format(st.Start), r.StartedISO, d)}
	}
	return Liveness{Alive, fmt.Sprintf("pid %d started %s, within %s of the record's %s", r.PID, isotime.Format(st.Start), StartWindow, r.StartedISO)}
}

// writerName says who wrote r, for messages.
func writerName(r Record) string {
	switch r.Writer {
	case "":
		return "the Rust, Kotlin and Node members record none"
	case "go":
		return "written by rightsize-go where there are no pid namespaces"
	default:
		return fmt.Sprintf("written by %q", r.Writer)
	}
}

// ticksCompare reports whether r's start ticks compare with this boot's.
func ticksCompare(r Record, me procid.Identity) bool {
	return !ticksNeedSameBoot || (r.BootID != "" && r.BootID == me.BootID)
}

// startedAfter reports whether st, a process found now, provably started
// after r's owner: by start ticks where they compare, else by start time
// beyond StartWindow. Unknown starts prove nothing.
func startedAfter(st procid.State, r Record, me procid.Identity) bool {
	if r.StartTicks != 0 && st.Ticks != 0 && ticksCompare(r, me) {
		return st.Ticks > r.StartTicks
	}
	started, err := r.Started()
	return err == nil && !started.IsZero() && !st.Start.IsZero() && st.Start.After(started.Add(StartWindow))
}
