package ledger

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/isotime"
	"github.com/rightsize/rightsize-go/internal/procid"
)

// judge's decisions with a crafted process table: the order of the rules
// and what each reason says, on every platform. The real-process rows are
// in liveness_linux_test.go.
func TestJudgeRules(t *testing.T) {
	boot := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	start := time.Date(2026, 11, 29, 20, 30, 38, 120_000_000, time.UTC)
	me := procid.Identity{PID: 100, Start: boot.Add(time.Minute), StartTicks: 6000, BootID: "boot-A", PidNamespace: "pid:[1]"}
	live := func(pid int, st procid.State) func(int) (procid.State, error) {
		return func(p int) (procid.State, error) {
			if p == pid {
				return st, nil
			}
			return procid.State{}, nil
		}
	}
	running := procid.State{Exists: true, Start: start, Ticks: 4500}
	foreign := Record{PID: 4242, StartedISO: isotime.Format(start), Backend: "docker"}
	goRec := Record{PID: 4242, StartedISO: isotime.Format(start), Backend: "docker", StartTicks: 4500, BootID: "boot-A", PidNamespace: "pid:[1]", Writer: "go"}
	with := func(r Record, f func(*Record)) Record { f(&r); return r }

	tests := []struct {
		name   string
		rec    Record
		me     procid.Identity
		lookup func(int) (procid.State, error)
		want   State
		has    []string
		reason string
	}{
		{"go exact ticks", goRec, me, live(4242, running), Alive, []string{"pid 4242", "4500"},
			"same boot, same namespace, same ticks: the owner, exactly"},
		{"go ticks differ", with(goRec, func(r *Record) { r.StartTicks = 4501 }), me, live(4242, running), Dead, []string{"reused", "4500", "4501"},
			"one tick apart is another process, however close the wall-clock times"},
		{"go ticks win over time", with(goRec, func(r *Record) { r.StartedISO = isotime.Format(start.Add(time.Hour)) }), me, live(4242, running), Alive, []string{"recorded start"},
			"with ticks, wall-clock drift in startedIso does not matter"},
		{"go other boot", with(goRec, func(r *Record) { r.BootID = "boot-B" }), me, live(4242, running), Dead, []string{"boot-B", "boot-A"},
			"a record from another boot is dead whatever its pid is now"},
		{"go other namespace", with(goRec, func(r *Record) { r.PidNamespace = "pid:[2]" }), me, live(4242, running), Unknown, []string{"pid:[2]", "pid:[1]"},
			"a pid of another namespace says nothing about the process with that number here"},
		{"foreign record, child namespace", foreign, me, live(4242, running), Unknown, []string{"names no pid namespace", "pid:[1]", "sweep from the host"},
			"a record without a namespace may number its pid in the host's: from a child namespace it cannot be judged"},
		{"other boot beats namespace", with(goRec, func(r *Record) { r.BootID = "boot-B"; r.PidNamespace = "pid:[2]" }), me, live(4242, running), Dead, []string{"boot"},
			"every process of an earlier boot is gone, whatever namespace it was in"},
		{"go record, boot unknown here", goRec, with2(me, func(i *procid.Identity) { i.BootID = "" }), live(4242, running), Alive, []string{"within"},
			"without this boot's id, ticks cannot be compared on Linux; on other systems they are absolute: alive either way"},
		{"no process", foreign, me, live(1, running), Dead, []string{"no process has pid 4242"},
			"no process with the pid: dead"},
		{"zombie", foreign, me, live(4242, procid.State{Exists: true, Exited: true}), Dead, []string{"exited"},
			"a zombie has exited; only its parent has not reaped it"},
		{"zombie without start", with(foreign, func(r *Record) { r.StartedISO = "" }), me, live(4242, procid.State{Exists: true, Exited: true}), Dead, []string{"exited"},
			"an exited process is dead even when the record cannot be compared"},
		{"foreign +2000ms", with(foreign, func(r *Record) { r.StartedISO = isotime.Format(start.Add(2000 * time.Millisecond)) }), me, live(4242, running), Alive, []string{"within"},
			"2000 ms apart is alive (Rust records whole seconds)"},
		{"foreign -2001ms", with(foreign, func(r *Record) { r.StartedISO = isotime.Format(start.Add(-2001 * time.Millisecond)) }), me, live(4242, running), Dead, []string{"reused", "2.001s"},
			"2001 ms apart is dead"},
		{"foreign no start time", with(foreign, func(r *Record) { r.StartedISO = "" }), me, live(4242, running), Alive, []string{"no start time"},
			"contract §9: an unknown start time for a live pid is alive, and says so"},
		{"kotlin epoch", with(foreign, func(r *Record) { r.StartedISO = "1970-01-01T00:00:00Z" }), me, live(4242, running), Alive, []string{"epoch", "Kotlin"},
			"Kotlin writes Instant.EPOCH when the JVM cannot read its start (Liveness.kt at db2958f): unknown, never 'before this boot'"},
		{"kotlin epoch, milliseconds", with(foreign, func(r *Record) { r.StartedISO = "1970-01-01T00:00:00.000Z" }), me, live(4242, running), Alive, []string{"epoch"},
			"the epoch in any precision is the same instant"},
		{"kotlin epoch, nanoseconds", with(foreign, func(r *Record) { r.StartedISO = "1970-01-01T00:00:00.000000000Z" }), me, live(4242, running), Alive, []string{"epoch"},
			"the epoch in any precision is the same instant"},
		{"epoch with an offset", with(foreign, func(r *Record) { r.StartedISO = "1970-01-01T01:00:00+01:00" }), me, live(4242, running), Alive, []string{"epoch"},
			"any spelling of the same instant is the epoch"},
		{"epoch, no process", with(foreign, func(r *Record) { r.StartedISO = "1970-01-01T00:00:00Z" }), me, live(1, running), Dead, []string{"no process has pid 4242"},
			"an unknown start spares a live pid only: no process with the pid is still dead"},
		{"a second after the epoch", with(foreign, func(r *Record) { r.StartedISO = "1970-01-01T00:00:01Z" }), me, live(4242, running), Dead, []string{"before this boot"},
			"only the epoch exactly means unknown; any other instant is a start, and this one is before the boot"},
		{"start unknown here", foreign, me, live(4242, procid.State{Exists: true, Unknown: "hidepid"}), Alive, []string{"unknown", "hidepid"},
			"a live pid whose start cannot be read is never called dead"},
		{"before boot", with(foreign, func(r *Record) { r.StartedISO = isotime.Format(boot.Add(-time.Hour)) }), me, live(4242, running), Dead, []string{"before this boot"},
			"a process that started before this boot cannot still run"},
		{"just before boot", with(foreign, func(r *Record) { r.StartedISO = isotime.Format(boot.Add(-time.Second)) }), me, live(4242, procid.State{Exists: true, Start: boot}), Alive, []string{"within"},
			"boot time is known to the second: a start within the window of it is not 'before boot'"},
		{"lookup fails", foreign, me, func(int) (procid.State, error) { return procid.State{}, errors.New("EINVAL") }, Unknown, []string{"EINVAL"},
			"a pid that cannot be looked up is Unknown, never dead"},
		{"bad startedIso", with(foreign, func(r *Record) { r.StartedISO = "noon" }), me, live(4242, running), Unknown, []string{"noon"},
			"a start time that cannot be read proves nothing"},
	}
	for _, tc := range tests {
		got := judge(tc.rec, tc.me, host{lookup: tc.lookup, boot: boot, initial: false, inNamespace: noNamespaces})
		if tc.rec.PidNamespace == "" && tc.name != "foreign record, child namespace" {
			// The other members' records: judged from the host's namespace.
			got = judge(tc.rec, tc.me, host{lookup: tc.lookup, boot: boot, initial: true, inNamespace: noNamespaces})
		}
		if tc.name == "go record, boot unknown here" && !ticksNeedSameBoot {
			tc.has = []string{"recorded start"}
		}
		if got.State != tc.want {
			t.Errorf("%s: judge = %v, want %v (%s)", tc.name, got, tc.want, tc.reason)
			continue
		}
		for _, h := range tc.has {
			if !strings.Contains(got.Reason, h) {
				t.Errorf("%s: reason %q does not mention %q (%s)", tc.name, got.Reason, h, tc.reason)
			}
		}
	}
}

func with2(i procid.Identity, f func(*procid.Identity)) procid.Identity { f(&i); return i }

func noNamespaces(string, int) (procid.State, bool, error) {
	return procid.State{}, false, errors.New("no namespaces in this test")
}

// From the host's own pid namespace, a record of another namespace is
// judged through the process that has the pid there, or is dead when the
// namespace has no process left.
func TestJudgeFromInitialNamespace(t *testing.T) {
	start := time.Date(2026, 11, 29, 20, 30, 38, 0, time.UTC)
	me := procid.Identity{PID: 100, BootID: "boot-A", PidNamespace: "pid:[4026531836]"}
	rec := Record{PID: 7, StartedISO: isotime.Format(start), Backend: "docker", StartTicks: 4500, BootID: "boot-A", PidNamespace: "pid:[99]", Writer: "go"}
	nothingHere := func(int) (procid.State, error) { return procid.State{}, nil }
	// inNS is a namespace that lives, with those processes in it.
	inNS := func(procs map[int]procid.State) func(string, int) (procid.State, bool, error) {
		return func(ns string, pid int) (procid.State, bool, error) {
			if ns != "pid:[99]" {
				return procid.State{}, false, nil
			}
			return procs[pid], true, nil
		}
	}
	olderInit := procid.State{Exists: true, Start: start.Add(-time.Minute), Ticks: 100}
	for _, tc := range []struct {
		name   string
		ns     func(string, int) (procid.State, bool, error)
		want   State
		has    string
		reason string
	}{
		{"namespace gone", func(string, int) (procid.State, bool, error) { return procid.State{}, false, nil }, Dead, "no process is left in pid namespace pid:[99]",
			"a CI job's container killed whole: nothing of its namespace runs, so its pid cannot"},
		{"owner runs there", inNS(map[int]procid.State{1: olderInit, 7: {Exists: true, Start: start, Ticks: 4500}}), Alive, "recorded start",
			"the pid as numbered in its own namespace, with the recorded start ticks"},
		{"owner runs there, its init unseen", inNS(map[int]procid.State{7: {Exists: true, Start: start, Ticks: 4500}}), Alive, "recorded start",
			"a namespace whose first process cannot be found proves nothing"},
		{"pid reused there", inNS(map[int]procid.State{1: olderInit, 7: {Exists: true, Start: start, Ticks: 9999}}), Dead, "was reused",
			"another process of that namespace has the number now"},
		{"namespace lives, pid gone", inNS(map[int]procid.State{1: olderInit}), Dead, "no process has pid 7",
			"the namespace runs on, without the owner"},
		{"namespace's number reused", inNS(map[int]procid.State{1: {Exists: true, Start: start.Add(time.Minute), Ticks: 10500}}),
			Dead, "no process is left in pid namespace pid:[99], where pid 7 ran: its number now names a newer namespace",
			"the kernel gave the freed number to a namespace made later: its first process started after the owner"},
		{"namespace's number reused, pid taken", inNS(map[int]procid.State{1: {Exists: true, Start: start.Add(time.Minute), Ticks: 10500}, 7: {Exists: true, Start: start.Add(time.Minute), Ticks: 10600}}),
			Dead, "newer namespace", "a process of the newer namespace has the owner's number"},
		{"namespace's init as old as the owner", inNS(map[int]procid.State{1: {Exists: true, Start: start, Ticks: 4500}, 7: {Exists: true, Start: start, Ticks: 4500}}),
			Alive, "recorded start", "the owner is the namespace's first process's tick: the same namespace"},
		{"cannot see", func(string, int) (procid.State, bool, error) {
			return procid.State{}, false, errors.New("permission denied")
		}, Unknown, "permission denied",
			"processes this one may not inspect might be in that namespace: not proven dead"},
	} {
		got := judge(rec, me, host{lookup: nothingHere, initial: true, inNamespace: tc.ns})
		if got.State != tc.want || !strings.Contains(got.Reason, tc.has) {
			t.Errorf("%s: judge = %v; want %v mentioning %q (%s)", tc.name, got, tc.want, tc.has, tc.reason)
		}
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Unknown: "unknown", Alive: "alive", Dead: "dead", State(9): "unknown"} {
		if s.String() != want {
			t.Errorf("State(%d).String() = %q, want %q", s, s.String(), want)
		}
	}
	if got := (Liveness{Dead, "no process has pid 1"}).String(); got != "dead: no process has pid 1" {
		t.Errorf("Liveness.String() = %q", got)
	}
	var zero Liveness
	if zero.State != Unknown {
		t.Error("the zero Liveness must be Unknown: an unset judgement never allows a removal")
	}
}

// A process found now started after a record's owner by start ticks where
// they compare (same boot), else by start time beyond StartWindow.
func TestStartedAfter(t *testing.T) {
	start := time.Date(2026, 11, 29, 20, 30, 38, 0, time.UTC)
	me := procid.Identity{BootID: "boot-A"}
	ticked := Record{PID: 7, StartedISO: isotime.Format(start), StartTicks: 4500, BootID: "boot-A"}
	unticked := Record{PID: 7, StartedISO: isotime.Format(start)}
	for _, tc := range []struct {
		name string
		st   procid.State
		r    Record
		want bool
	}{
		{"later ticks", procid.State{Ticks: 4501}, ticked, true},
		{"same ticks", procid.State{Ticks: 4500, Start: start.Add(time.Hour)}, ticked, false},
		{"earlier ticks", procid.State{Ticks: 4499, Start: start.Add(time.Hour)}, ticked, false},
		{"no ticks recorded, started a minute later", procid.State{Ticks: 4499, Start: start.Add(time.Minute)}, unticked, true},
		{"no ticks recorded, started within the window", procid.State{Start: start.Add(StartWindow / 2)}, unticked, false},
		{"no start known", procid.State{Ticks: 9999}, unticked, false},
		{"no start recorded", procid.State{Start: start.Add(time.Hour)}, Record{PID: 7}, false},
	} {
		if got := startedAfter(tc.st, tc.r, me); got != tc.want {
			t.Errorf("%s: startedAfter = %v, want %v", tc.name, got, tc.want)
		}
	}
}
