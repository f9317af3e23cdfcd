package procid

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/isotime"
)

// startSleeper starts a child that lives until the test ends, and returns
// its identity as Lookup learns it.
func startSleeper(t *testing.T) (*exec.Cmd, Identity) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id, ok, err := Lookup(cmd.Process.Pid)
	if err != nil || !ok {
		t.Fatalf("Lookup(live child %d) = %+v, %v, %v", cmd.Process.Pid, id, ok, err)
	}
	if id.Start.IsZero() || id.StartTicks == 0 {
		t.Fatalf("Lookup(live child) gave no start time: %+v", id)
	}
	return cmd, id
}

func TestLookup(t *testing.T) {
	cmd, id := startSleeper(t)
	if id.PID != cmd.Process.Pid {
		t.Errorf("Lookup PID %d, want %d", id.PID, cmd.Process.Pid)
	}
	// The child started just now, within the resolution of the clock ticks
	// and of btime (whole seconds).
	if d := time.Since(id.Start); d < -2*time.Second || d > 30*time.Second {
		t.Errorf("Lookup(child).Start = %v, %v ago: not the child's start", id.Start, d)
	}
	me, _ := Self()
	if id.StartTicks < me.StartTicks {
		t.Errorf("child started at tick %d, before this process (%d)", id.StartTicks, me.StartTicks)
	}
	if _, ok, err := Lookup(0); ok || err != nil {
		t.Errorf("Lookup(0) = %v, %v", ok, err)
	}
	if _, ok, err := Lookup(1 << 30); ok || err != nil {
		t.Errorf("Lookup(no such pid) = %v, %v", ok, err)
	}
}

func TestParseStat(t *testing.T) {
	tail := " 1 0 0 0 -1 4194304 94 0 0 0 0 0 0 0 20 0 1 0 63946 3133440 361"
	tests := []struct {
		line   string
		state  byte
		ticks  uint64
		ok     bool
		reason string
	}{
		{"3 (cat) R" + tail, 'R', 63946, true, "field 22 is the start time"},
		{"3 (a) b) c) S" + tail, 'S', 63946, true, "a command name holding ') ' is split after the last ')'"},
		{"3 (x y z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20) Z" + tail, 'Z', 63946, true, "spaces and digits in the name do not shift the fields"},
		{"3 (cat R" + tail, 0, 0, false, "no ')': not a stat line"},
		{"3 (cat) R 1 0", 0, 0, false, "too few fields"},
		{"3 (cat) RR" + tail, 0, 0, false, "the state is one character"},
		{"3 (cat) R 1 0 0 0 -1 4194304 94 0 0 0 0 0 0 0 20 0 1 0 -5 3133440 361", 0, 0, false, "a negative start time"},
	}
	for _, tc := range tests {
		state, ticks, err := parseStat([]byte(tc.line))
		if (err == nil) != tc.ok || state != tc.state || ticks != tc.ticks {
			t.Errorf("parseStat(%q) = %q, %d, %v; want %q, %d, ok %v (%s)", tc.line, state, ticks, err, tc.state, tc.ticks, tc.ok, tc.reason)
		}
	}
}

// The start time Go records and reads agrees with what `ps` says of the same
// process, to within ps's own rounding: the other members derive theirs
// from `ps -o etime` (Node, Rust), and the family's window is 2 s. Taking
// the boot instant from /proc/stat's whole-second btime once put Go's view
// up to a second early, which used up to 1.8 s of that window.
func TestStartTimeAgreesWithPs(t *testing.T) {
	ps, err := exec.LookPath("ps")
	if err != nil {
		t.Skip("no ps here: ", err)
	}
	cmd, id := startSleeper(t)
	pid := strconv.Itoa(cmd.Process.Pid)
	// Wait until the child is past its first second, so that etimes says
	// something.
	time.Sleep(1500 * time.Millisecond)

	// Node's and Rust's view: now less the whole seconds ps prints.
	before := time.Now()
	out, err := exec.Command(ps, "-o", "etimes=", "-p", pid).Output()
	after := time.Now()
	if err != nil {
		t.Skipf("ps -o etimes: %v (not procps?)", err)
	}
	secs, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Skipf("ps -o etimes printed %q", out)
	}
	// ps truncates the elapsed time: the true start lies in
	// (now-secs-1, now-secs], now somewhere between before and after.
	lo := before.Add(-time.Duration(secs+1) * time.Second)
	hi := after.Add(-time.Duration(secs) * time.Second)
	tick := 10 * time.Millisecond
	if id.Start.Before(lo.Add(-tick)) || id.Start.After(hi.Add(tick)) {
		t.Errorf("Go's start %s is outside ps's (%s, %s]", isotime.Format(id.Start), isotime.Format(lo), isotime.Format(hi))
	}
	nodeView := time.Now().Add(-time.Duration(secs) * time.Second)
	margin := nodeView.Sub(id.Start)
	t.Logf("pid %s: Go's start %s; ps -o etimes=%d; a ps-derived start is %s later, of the family's %s window", pid, isotime.Format(id.Start), secs, margin.Round(time.Millisecond), 2*time.Second)
	if margin < -tick || margin > time.Second+100*time.Millisecond {
		t.Errorf("margin to the ps-derived start %s: want within [0, 1 s] (the rounding of etime)", margin)
	}

	// lstart, in whole seconds of local time.
	out, err = exec.Command(ps, "-o", "lstart=", "-p", pid).Output()
	if err == nil {
		lstart, perr := time.ParseInLocation("Mon Jan _2 15:04:05 2006", strings.Join(strings.Fields(string(out)), " "), time.Local)
		if perr == nil {
			d := id.Start.Sub(lstart)
			t.Logf("ps -o lstart: %s, %s before Go's start", lstart.UTC().Format(time.RFC3339), d.Round(time.Millisecond))
			if d < -time.Second || d > 2*time.Second {
				t.Errorf("Go's start %s and ps's lstart %s are %s apart", isotime.Format(id.Start), lstart.UTC(), d)
			}
		}
	}
}
