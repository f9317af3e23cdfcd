package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

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
	if got := judge(foreign(child.Start), me, lookupProc, child.Start.Add(time.Hour)); got.State != Dead {
		t.Errorf("judge with a boot an hour after the start = %v, want dead", got)
	}
	// A crafted identity: without this boot's id the ticks are not
	// comparable, and the window decides.
	noBoot := me
	noBoot.BootID = ""
	if got := judge(with(goRec, func(r *Record) { r.StartTicks++ }), noBoot, lookupProc, boot); got.State != Alive || !strings.Contains(got.Reason, "within") {
		t.Errorf("judge without a boot id here = %v, want alive by the 2 s window", got)
	}

	zombie.Wait()
	reaped = true
	if got := Judge(Record{PID: zombiePID, Backend: "docker"}); got.State != Dead || !strings.Contains(got.Reason, "no process") {
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
	r, err := NewRun(cache, Owner{Backend: "docker"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	if err := r.AddSandbox("rz-" + r.ID() + "-1"); err != nil {
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
	if rec.BootID != me.BootID {
		t.Fatalf("helper recorded boot %q, this boot is %q", rec.BootID, me.BootID)
	}
	got := Judge(rec)
	if got.State != Unknown {
		t.Fatalf("Judge(record of pid %d in %s) = %v; want unknown: that pid number means another process here", rec.PID, rec.PidNamespace, got)
	}
	for _, ns := range []string{rec.PidNamespace, me.PidNamespace} {
		if !strings.Contains(got.Reason, ns) {
			t.Errorf("reason %q does not name namespace %s", got.Reason, ns)
		}
	}
	// Without the namespace field the same record would be judged against
	// whatever process has that pid here: the danger the field defeats.
	bare := rec
	bare.PidNamespace = ""
	t.Logf("namespace: %v; without the field it would be: %v", got, Judge(bare))
}
