package ledger

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/isotime"
	"github.com/rightsize/rightsize-go/internal/pidns"
	"github.com/rightsize/rightsize-go/internal/procid"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// startSleeper starts a child that lives until the test ends, and returns
// its identity as Lookup learns it.
func startSleeper(t *testing.T) (*exec.Cmd, procid.Identity) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id, ok, err := procid.Lookup(cmd.Process.Pid)
	if err != nil || !ok {
		t.Fatalf("procid.Lookup(live child %d) = %+v, %v, %v", cmd.Process.Pid, id, ok, err)
	}
	if id.Start.IsZero() || id.StartTicks == 0 {
		t.Fatalf("procid.Lookup(live child) gave no start time: %+v", id)
	}
	return cmd, id
}

func TestJudgeRealProcesses(t *testing.T) {
	me, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	if me.BootID == "" || me.PidNamespace == "" || me.StartTicks == 0 {
		t.Fatalf("procid.Self() = %+v: the Linux identity fields are missing", me)
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
		st, err := procid.Proc(zombiePID)
		return err == nil && st.Exited
	})

	_, child := startSleeper(t)
	foreign := func(at time.Time) Record {
		return Record{PID: child.PID, StartedISO: isotime.Format(at), Backend: "docker"}
	}
	goRec := Record{PID: child.PID, StartedISO: isotime.Format(child.Start), Backend: "docker",
		StartTicks: child.StartTicks, BootID: child.BootID, PidNamespace: child.PidNamespace, Writer: "go"}
	with := func(r Record, f func(*Record)) Record { f(&r); return r }
	boot := procid.BootTime()
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
		{name: "this process", rec: Record{PID: me.PID, StartedISO: isotime.Format(me.Start), Backend: "docker", StartTicks: me.StartTicks, BootID: me.BootID, PidNamespace: me.PidNamespace, Writer: "go"},
			want: Alive, reason: fmt.Sprintf("pid %d runs with the recorded start (%d)", me.PID, me.StartTicks),
			why: "our own Go record: same boot and namespace, exact ticks"},
		{name: "finished child", rec: Record{PID: donePID, StartedISO: isotime.Format(time.Now()), Backend: "docker"},
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
	if got := judge(foreign(child.Start), me, host{lookup: procid.Proc, boot: child.Start.Add(time.Hour), initial: true}); got.State != Dead {
		t.Errorf("judge with a boot an hour after the start = %v, want dead", got)
	}
	// A crafted identity: without this boot's id the ticks are not
	// comparable, and the window decides.
	noBoot := me
	noBoot.BootID = ""
	if got := judge(with(goRec, func(r *Record) { r.StartTicks++ }), noBoot, host{lookup: procid.Proc, boot: boot, initial: true}); got.State != Alive || !strings.Contains(got.Reason, "within") {
		t.Errorf("judge without a boot id here = %v, want alive by the 2 s window", got)
	}

	zombie.Wait()
	reaped = true
	if got := Judge(Record{PID: zombiePID, Backend: "docker", PidNamespace: me.PidNamespace}); got.State != Dead || !strings.Contains(got.Reason, "no process") {
		t.Errorf("reaped zombie: Judge = %v, want dead, no process", got)
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
	me, _ := procid.Self()
	rec := Record{PID: me.PID, StartedISO: isotime.Format(me.Start), Backend: "docker"} // Node's format
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
