// Package proctree ends the local processes a test started — a command,
// and every process it started in turn — without ever signalling a
// process that is not provably one of them.
//
// Each command runs in a process group of its own, with a mark in its
// environment (EnvMark=<run>.<n>) that its descendants inherit. A process
// is the command's when one of these proves it:
//
//   - it carries the command's mark (which a process that rewrites its
//     title over its environment, or one started with a cleared
//     environment, no longer does);
//   - it is in the command's process group, in the command's session,
//     while something proves that group is still the command's: its leader
//     (the command itself: pid and start time), a member with the mark, or
//     a member that started while the group's number was pinned (the
//     owner keeps the command unreaped, so the number cannot pass to
//     another group while it lives);
//   - its parent is proven, and it started after its parent.
//
// Two rules hold for every signal sent here (the containment rules of the
// family's process guards):
//
//   - A process is signalled only while it is pinned: the group of an
//     unreaped child of the signaller (the test process ending its own
//     command), or, for anyone else (the watchdog, a sweep), a pidfd
//     opened on the process and checked after opening to be the process
//     that was proven (same pid, same start): signals through a pidfd
//     reach that process or none, whatever became of its number.
//   - A group the signaller belongs to is never signalled.
//
// What cannot be proven is not signalled, and the result says why. A
// proven process that left its command's session (setsid, a daemon) is
// escaped: it is reported, not signalled, except by hand.
package proctree

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// EnvMark is the environment variable that marks a command, and every
// process it starts, as a test's: its value is "<run>.<line>", line being
// the command's line in the run's ledger: "p<n>.<session>", the session it
// was started in.
const EnvMark = "RIGHTSIZE_PROCESS"

// Line is the ledger line of command n of a process in session sid.
func Line(n uint64, sid int) string {
	return "p" + strconv.FormatUint(n, 10) + "." + strconv.Itoa(sid)
}

// Mark is the value of EnvMark for the command of run with ledger line.
func Mark(run, line string) string { return run + "." + line }

// Started is the ledger line of the command of line once it has started
// as id (an ID): p<n>.<session>.<pid>.<start ticks>. It is what lets a
// sweep, with no watchdog left, prove the command's group.
func Started(line, id string) string { return line + "." + id }

// Command is a started command of a run, as its watchdog was told it or
// its ledger line says: what proves its process group.
type Command struct {
	Mark    string // EnvMark's value
	Session int    // the session it was started in
	PID     int    // it leads process group PID
	Ticks   uint64 // its start, in clock ticks since boot

	held // what Hold keeps, where a platform can hold anything
}

// ParseLine reads a ledger line of run: a started line gives its Command;
// a line written before the start (p<n>.<session>) gives one with PID 0,
// whose mark alone can prove anything.
func ParseLine(run, line string) (Command, bool) {
	f := strings.Split(line, ".")
	if len(f) != 2 && len(f) != 4 {
		return Command{}, false
	}
	n, ok := strings.CutPrefix(f[0], "p")
	if !ok || !allDigits(n) || !allDigits(f[1]) {
		return Command{}, false
	}
	sid, err := strconv.Atoi(f[1])
	if err != nil {
		return Command{}, false
	}
	c := Command{Mark: Mark(run, f[0]+"."+f[1]), Session: sid}
	if len(f) == 4 {
		pid, ticks, ok := ParseID(f[2] + "." + f[3])
		if !ok || !allDigits(f[2]) || !allDigits(f[3]) {
			return Command{}, false
		}
		c.PID, c.Ticks = pid, ticks
	}
	return c, true
}

// Scope is what a signaller other than the commands' parent (a watchdog,
// a sweep) may end: every process Marks accepts, and every process one of
// Commands proves (by its group, or by descent).
type Scope struct {
	Marks    func(string) bool
	Commands []Command
	// PinnedUntil is a time, in clock ticks since boot (Now), until which
	// the commands' owner held each of them unreaped, pinning their
	// groups' numbers: a watchdog takes the moment it learnt of the
	// owner's death. 0 when unknown (a sweep).
	PinnedUntil uint64
}

// OfRun returns a matcher of the marks of run's commands.
func OfRun(run string) func(string) bool {
	prefix := run + ".p"
	return func(m string) bool {
		// Exactly <run>.p<n>.<session>: a run whose id has dots (another
		// member's) must not match the marks of a run named after it.
		rest, ok := strings.CutPrefix(m, prefix)
		if !ok {
			return false
		}
		n, sid, ok := strings.Cut(rest, ".")
		return ok && allDigits(n) && allDigits(sid)
	}
}

// OfMarks returns a matcher of the given marks.
func OfMarks(marks ...string) func(string) bool {
	return func(m string) bool {
		for _, x := range marks {
			if m == x {
				return true
			}
		}
		return false
	}
}

// ErrUnsupported: this system offers no way to prove which process a
// signal would reach from outside its parent (no pidfd, no /proc).
var ErrUnsupported = errors.New("proctree: processes cannot be proven from outside their parent on this system")

// ID is the ledger's and the watchdog's name for a started command:
// "<pid>.<start ticks>".
func ID(pid int, ticks uint64) string {
	return strconv.Itoa(pid) + "." + strconv.FormatUint(ticks, 10)
}

// ParseID splits an ID.
func ParseID(id string) (pid int, ticks uint64, ok bool) {
	p, t, found := strings.Cut(id, ".")
	if !found {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 1 {
		return 0, 0, false
	}
	ticks, err = strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return pid, ticks, true
}

// Proc is one process of a tree, as a result names it.
type Proc struct {
	PID     int
	Command string
	// Why: for an escaped process, how it left; for a survivor, why it
	// was not signalled or not ended; for an ended one without the mark,
	// what proved it the command's.
	Why string
	// Marked: it carries the run's mark, so a later look (a sweep by
	// hand) finds it again wherever it is; a process without it is found
	// only while what proved it (its group, its parent) is there.
	Marked bool
}

// Result is what ending a tree did.
type Result struct {
	// Ended: processes that were signalled and are gone.
	Ended []Proc
	// Escaped: marked processes outside the command's group (a new
	// session, a group of their own): not signalled unless by hand.
	Escaped []Proc
	// Left: processes that were signalled but outlived SIGKILL's wait, or
	// could not be signalled; Why says.
	Left []Proc
	// NotProven: processes in a command's process group that nothing
	// proves are still the command's (its leader and every member that
	// would prove it are gone, and they carry no mark): never signalled.
	NotProven []Proc
	// Unproven says why nothing could be signalled at all (nil
	// otherwise); ErrUnsupported where the system offers no way.
	Unproven error
}

// Clean reports whether nothing of the tree is left.
func (r Result) Clean() bool {
	return len(r.Escaped) == 0 && len(r.Left) == 0 && len(r.NotProven) == 0 && r.Unproven == nil
}

// DefaultGrace is how long a tree is given between SIGTERM and SIGKILL.
const DefaultGrace = 2 * time.Second

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
