package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/pidns"
	"github.com/rightsize/rightsize-go/internal/proctest"
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

func TestJudgeRealProcesses(t *testing.T) {
	me, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if me.BootID == "" || me.PidNamespace == "" || me.StartTicks == 0 {
		t.Fatalf("Self() = %+v: the Linux identity fields are missing", me)
	}

	// A finished child: started, waited for.
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	donePID := done.Process.Pid

	// A zombie: exited, not waited for yet.
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	zombiePID := zombie.Process.Pid
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			zombie.Wait()
		}
	})
	proctest.WaitUntil(t, 10*time.Second, "the child to become a zombie", func() bool {
		st, err := lookupProc(zombiePID)
		return err == nil && st.exited
	})

	_, child := startSleeper(t)
	foreign := func(at time.Time) Record {
		return Record{PID: child.PID, StartedISO: FormatISO(at), Backend: "docker"}
	}
	goRec := Record{PID: child.PID, StartedISO: FormatISO(child.Start), Backend: "docker",
		StartTicks: child.StartTicks, BootID: child.BootID, PidNamespace: child.PidNamespace, Writer: "go"}
	with := func(r Record, f func(*Record)) Record { f(&r); return r }
	boot := bootTime()
	if boot.IsZero() {
		t.Fatal("boot time unknown on Linux")
	}

	tests := []struct {
		name   string
		rec    Record
		want   State
		reason string // exact, when set by a row that pins it
		has    string
		why    string
	}{
		{name: "this process", rec: Record{PID: me.PID, StartedISO: FormatISO(me.Start), Backend: "docker", StartTicks: me.StartTicks, BootID: me.BootID, PidNamespace: me.PidNamespace, Writer: "go"},
			want: Alive, reason: fmt.Sprintf("pid %d runs with the recorded start (%d)", me.PID, me.StartTicks),
			why: "our own Go record: same boot and namespace, exact ticks"},
		{name: "finished child", rec: Record{PID: donePID, StartedISO: FormatISO(time.Now()), Backend: "docker"},
			want: Dead, reason: fmt.Sprintf("no process has pid %d", donePID),
			why: "a child that exited and was waited for leaves no process"},
		{name: "zombie", rec: Record{PID: zombiePID, StartedISO: "", Backend: "docker"},
			want: Dead, reason: fmt.Sprintf("pid %d has exited (its parent has not reaped it yet)", zombiePID),
			why: "a zombie still holds its pid but runs nothing; its state wins over the missing start time"},
		{name: "go record of a live child", rec: goRec, want: Alive, has: "recorded start",
			why: "the child's identity, recorded as rightsize-go does"},
		{name: "ticks off by one", rec: with(goRec, func(r *Record) { r.StartTicks++ }), want: Dead, has: "reused",
			why: "one clock tick later is another process that reused the pid"},
		{name: "ticks off by minus one", rec: with(goRec, func(r *Record) { r.StartTicks-- }), want: Dead, has: "reused",
			why: "one clock tick earlier too"},
		{name: "another boot", rec: with(goRec, func(r *Record) { r.BootID = "00000000-0000-0000-0000-000000000000" }), want: Dead, has: "another boot",
			why: "no process survives a reboot, whatever now has its pid"},
		{name: "foreign +2000ms", rec: foreign(child.Start.Add(2000 * time.Millisecond)), want: Alive, has: "within",
			why: "2000 ms apart is alive: Rust records whole seconds"},
		{name: "foreign -2000ms", rec: foreign(child.Start.Add(-2000 * time.Millisecond)), want: Alive, has: "within",
			why: "the window is symmetric"},
		{name: "foreign +2001ms", rec: foreign(child.Start.Add(2001 * time.Millisecond)), want: Dead, has: "2.001s apart",
			why: "2001 ms apart is a reused pid"},
		{name: "foreign -2001ms", rec: foreign(child.Start.Add(-2001 * time.Millisecond)), want: Dead, has: "2.001s apart",
			why: "2001 ms earlier too"},
		{name: "foreign exact", rec: foreign(child.Start), want: Alive, has: "within",
			why: "a foreign record of the live child's real start"},
		{name: "no start time", rec: with(foreign(child.Start), func(r *Record) { r.StartedISO = "" }), want: Alive,
			reason: fmt.Sprintf("pid %d runs and the record has no start time: taken to be the owner", child.PID),
			why:    "contract §9: never reap what is not proven dead, and say why"},
		{name: "before this boot", rec: foreign(boot.Add(-time.Hour)), want: Dead, has: "before this boot",
			why: "a foreign record whose process started before this boot is dead, though its pid runs now"},
	}
	for _, tc := range tests {
		if tc.rec.PidNamespace == "" && !pidns.InInitial() {
			t.Logf("%s: not judged here: a record without a pid namespace is unknown from %s by design", tc.name, pidns.Self())
			continue
		}
		got := Judge(tc.rec)
		if got.State != tc.want {
			t.Errorf("%s: Judge = %v, want %v (%s)", tc.name, got, tc.want, tc.why)
			continue
		}
		if tc.reason != "" && got.Reason != tc.reason {
			t.Errorf("%s: reason %q, want %q (%s)", tc.name, got.Reason, tc.reason, tc.why)
		}
		if !strings.Contains(got.Reason, tc.has) {
			t.Errorf("%s: reason %q does not mention %q (%s)", tc.name, got.Reason, tc.has, tc.why)
		}
	}

	// A crafted boot time: the same live child, judged as if this boot
	// began after it started, is dead (its record predates the boot).
	if got := judge(foreign(child.Start), me, host{lookup: lookupProc, boot: child.Start.Add(time.Hour), initial: true}); got.State != Dead {
		t.Errorf("judge with a boot an hour after the start = %v, want dead", got)
	}
	// A crafted identity: without this boot's id the ticks are not
	// comparable, and the window decides.
	noBoot := me
	noBoot.BootID = ""
	if got := judge(with(goRec, func(r *Record) { r.StartTicks++ }), noBoot, host{lookup: lookupProc, boot: boot, initial: true}); got.State != Alive || !strings.Contains(got.Reason, "within") {
		t.Errorf("judge without a boot id here = %v, want alive by the 2 s window", got)
	}

	zombie.Wait()
	reaped = true
	if got := Judge(Record{PID: zombiePID, Backend: "docker", PidNamespace: me.PidNamespace}); got.State != Dead || !strings.Contains(got.Reason, "no process") {
		t.Errorf("reaped zombie: Judge = %v, want dead, no process", got)
	}
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

// envNSHelper switches the test binary into the helper that runs inside a
// new pid namespace: it writes its own record with the real code, prints
// its run id, and stays alive until its stdin closes.
const envNSHelper = "RIGHTSIZE_LEDGER_TEST_NS_CACHE"

func TestNamespaceHelper(t *testing.T) {
	cache := os.Getenv(envNSHelper)
	if cache == "" {
		t.Skip("helper process for TestJudgeOtherPidNamespace only")
	}
	r, err := NewRun(cache, Owner{Backend: "docker", Endpoint: "unix:///var/run/docker.sock", DefaultEngine: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	if err := r.Add(SandboxKind, "rz-"+r.ID()+"-1"); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	fmt.Printf("run %s\n", r.ID())
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func TestJudgeOtherPidNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a new pid namespace needs root here (unshare --pid); not root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare(1) is not installed: ", err)
	}
	cache := t.TempDir()
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", os.Args[0], "-test.run=^TestNamespaceHelper$")
	cmd.Env = append(os.Environ(), envNSHelper+"="+cache)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-waited
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stdin.Close()
		werr := cmd.Wait()
		msg := stderr.String()
		var exit *exec.ExitError
		if errors.As(werr, &exit) && (strings.Contains(msg, "Operation not permitted") || strings.Contains(msg, "Permission denied")) {
			t.Skipf("unshare --pid is not permitted here: %s", strings.TrimSpace(msg))
		}
		t.Fatalf("namespace helper: %v, %v\n%s", err, werr, msg)
	}
	id, ok := strings.CutPrefix(strings.TrimSpace(line), "run ")
	if !ok {
		t.Fatalf("namespace helper said %q", line)
	}
	rf, err := ReadRun(cache, id)
	if err != nil || rf.RecordErr != nil {
		t.Fatalf("record written inside the namespace: %+v, %v", rf, err)
	}
	rec := rf.Record
	me, _ := Self()
	if rec.PidNamespace == "" || rec.PidNamespace == me.PidNamespace {
		t.Fatalf("helper recorded pid namespace %q, this process is in %q: the helper did not run in a new namespace", rec.PidNamespace, me.PidNamespace)
	}
	// The other members record no namespace and would look the pid up in
	// theirs: they are never shown the run (FamilyJudges).
	if _, err := os.Lstat(RecordPath(filepath.Join(cache, RunsDir), id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a run owned from another pid namespace has a family record (%v): the other members would judge pid %d in theirs", err, rec.PID)
	}
	if rec.BootID != me.BootID {
		t.Fatalf("helper recorded boot %q, this boot is %q", rec.BootID, me.BootID)
	}
	// From the host's namespace the owner is found through its NSpid, and
	// its start ticks prove it is the one.
	if !inInitialPidNamespace() {
		t.Skipf("this test runs in pid namespace %s, not the host's: it cannot see into another", me.PidNamespace)
	}
	got := Judge(rec)
	if got.State != Alive {
		t.Fatalf("Judge(record of pid %d in %s) = %v; want alive: the owner runs there", rec.PID, rec.PidNamespace, got)
	}
	// A namespace killed whole (a CI job's container, its watchdog with
	// it): nothing is left in it, so its owner is proven dead.
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("namespace helper: %v\n%s", err, stderr.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = Judge(rec)
		if got.State == Dead || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the index of namespaces is kept a second
	}
	if got.State != Dead || !strings.Contains(got.Reason, "no process is left in pid namespace "+rec.PidNamespace) {
		t.Errorf("after the namespace ended: Judge = %v; want dead, no process left in %s", got, rec.PidNamespace)
	}
}

// envNSJudge switches the test binary into a helper that judges, from
// inside a new pid namespace, the record in the file it names, and prints
// the judgement.
const envNSJudge = "RIGHTSIZE_LEDGER_TEST_NS_JUDGE"

func TestNamespaceJudgeHelper(t *testing.T) {
	p := os.Getenv(envNSJudge)
	if p == "" {
		t.Skip("helper process for TestJudgeFromChildPidNamespace only")
	}
	b, err := os.ReadFile(p)
	if err == nil {
		var rec Record
		if rec, err = ParseRecord(b); err == nil {
			l := Judge(rec)
			fmt.Printf("%s|%s\n", l.State, l.Reason)
			os.Exit(0)
		}
	}
	fmt.Fprintln(os.Stderr, "helper:", err)
	os.Exit(3)
}

// A record without a pid namespace (as the Rust, Kotlin and Node members
// write them) of a live process on the host, judged from a child pid
// namespace, where that pid names nothing or another process: unknown,
// never dead.
func TestJudgeFromChildPidNamespace(t *testing.T) {
	if !pidns.InInitial() {
		t.Skipf("compares a child pid namespace with the host's, and this process is in %s", pidns.Self())
	}
	if os.Geteuid() != 0 {
		t.Skip("a new pid namespace needs root here (unshare --pid); not root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare(1) is not installed: ", err)
	}
	me, _ := Self()
	rec := Record{PID: me.PID, StartedISO: FormatISO(me.Start), Backend: "docker"} // Node's format
	p := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(p, rec.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", os.Args[0], "-test.run=^TestNamespaceJudgeHelper$")
	cmd.Env = append(os.Environ(), envNSJudge+"="+p)
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && (strings.Contains(string(exit.Stderr), "Operation not permitted") || strings.Contains(string(exit.Stderr), "Permission denied")) {
			t.Skipf("unshare --pid is not permitted here: %s", exit.Stderr)
		}
		t.Fatalf("judge helper: %v\n%s", err, out)
	}
	state, reason, _ := strings.Cut(strings.TrimSpace(string(out)), "|")
	if state != "unknown" || !strings.Contains(reason, "names no pid namespace") {
		t.Errorf("judged from a child namespace: %s: %s; want unknown (the pid is the host's)", state, reason)
	}
	if got := Judge(rec); got.State != Alive {
		t.Errorf("the same record judged here, on the host: %v; want alive", got)
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
		t.Errorf("Go's start %s is outside ps's (%s, %s]", FormatISO(id.Start), FormatISO(lo), FormatISO(hi))
	}
	nodeView := time.Now().Add(-time.Duration(secs) * time.Second)
	margin := nodeView.Sub(id.Start)
	t.Logf("pid %s: Go's start %s; ps -o etimes=%d; a ps-derived start is %s later, of the family's %s window", pid, FormatISO(id.Start), secs, margin.Round(time.Millisecond), StartWindow)
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
				t.Errorf("Go's start %s and ps's lstart %s are %s apart", FormatISO(id.Start), lstart.UTC(), d)
			}
		}
	}
}
