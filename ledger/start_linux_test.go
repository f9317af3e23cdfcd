package ledger_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/ledger"
)

// envWriteCache switches the test binary into the helper that writes a
// run: the cache dir to write it in. With envWriteNoProc set, the helper
// first checks that it has no /proc.
const (
	envWriteCache  = "RIGHTSIZE_LEDGER_TEST_WRITE_CACHE"
	envWriteNoProc = "RIGHTSIZE_LEDGER_TEST_WRITE_NOPROC"
)

// helperOwner owns the helper's run: one the other members may be shown.
var helperOwner = ledger.Owner{Backend: "docker", Endpoint: "unix:///var/run/docker.sock", DefaultEngine: true}

// TestWriteRunHelper is not a test: it writes one run in the cache dir it
// is given, and says its id.
func TestWriteRunHelper(t *testing.T) {
	cache := os.Getenv(envWriteCache)
	if cache == "" {
		t.Skip("helper process of the tests that write a run elsewhere")
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && os.Getenv(envWriteNoProc) != "" {
		proctest.Say("error", "/proc is mounted")
		return
	}
	r, err := ledger.NewRun(cache, helperOwner)
	if err == nil {
		err = r.Add(ledger.SandboxKind, "rz-"+r.ID()+"-1")
	}
	if err != nil {
		proctest.Say("error", err.Error())
		return
	}
	proctest.Say("error", "")
	proctest.Say("run", r.ID())
}

// TestRecordStartWithoutProc: a process that cannot read its own start (no
// /proc in its mount namespace) still records one, close to the real
// start: a record with "startedIso":"" is judged dead by every other
// member while its owner lives (contract §12). The real start is read
// from here, where /proc is mounted.
func TestRecordStartWithoutProc(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to unmount /proc in a mount namespace of the helper's own")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("no unshare(1) here: %v", err)
	}
	cache := t.TempDir()
	argv := append([]string{unshare, "--mount", "--propagation", "private", "sh", "-c", `umount -l /proc && exec "$0" "$@"`},
		proctest.TestArgv("TestWriteRunHelper")...)
	h := proctest.StartHelper(t, proctest.Spec{Name: "helper without /proc", Argv: argv, Env: proctest.Environ(nil, envWriteCache+"="+cache, envWriteNoProc+"=1")})
	real, ok, err := ledger.Lookup(h.Cmd.Process.Pid)
	if err != nil || !ok {
		t.Fatalf("look up the helper, pid %d: %v (found %v)", h.Cmd.Process.Pid, err, ok)
	}
	if msg := h.Expect("error"); msg != "" {
		t.Fatalf("helper: %s\n%s", msg, h.Output())
	}
	id := h.Expect("run")
	h.Finish()

	data, err := os.ReadFile(ledger.OwnRecordPath(filepath.Join(cache, ledger.RunsDir), id))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ledger.ParseRecord(data)
	if err != nil {
		t.Fatalf("record %s: %v", data, err)
	}
	started, _ := rec.Started()
	if rec.StartedISO == "" || started.IsZero() {
		t.Fatalf("a process without /proc recorded no start: %s", data)
	}
	if d := started.Sub(real.Start).Abs(); d > ledger.StartWindow {
		t.Errorf("recorded start %s is %s from the real one %s: the other members would judge the live owner dead", rec.StartedISO, d, ledger.FormatISO(real.Start))
	}
	t.Logf("real start %s, recorded %s", ledger.FormatISO(real.Start), rec.StartedISO)
}

// TestRecordHiddenWithoutPs: on a host with no ps (slim images), the Node
// and Rust members judge every run dead (process-liveness.ts,
// posixStartedIso: no ps output is "cannot be determined", and
// isRecordAlive reaps that; rightsize-node 0b3b667). A Go run there is not
// shown to them: its record is Go's own only.
func TestRecordHiddenWithoutPs(t *testing.T) {
	cache := t.TempDir()
	h := proctest.StartHelper(t, proctest.Spec{Name: "helper without ps", Argv: proctest.TestArgv("TestWriteRunHelper"),
		Env: proctest.Environ(nil, envWriteCache+"="+cache, "PATH="+t.TempDir())})
	if msg := h.Expect("error"); msg != "" {
		t.Fatalf("helper: %s\n%s", msg, h.Output())
	}
	id := h.Expect("run")
	h.Finish()
	runs := filepath.Join(cache, ledger.RunsDir)
	if got, want := dirNames(t, runs), []string{id + ledger.OwnRecordExt, id + ledger.SandboxesExt}; !slices.Equal(got, want) {
		t.Errorf("a run written where no ps is on the PATH: %q, want %q (no %s for the other members to misjudge)", got, want, ledger.RecordExt)
	}
	if rf, err := ledger.ReadRun(cache, id); err != nil || rf.RecordErr != nil || rf.Record.PID != h.Cmd.Process.Pid {
		t.Errorf("Go reads the run's own record: %+v, %v", rf, err)
	}
}

// dirNames lists dir, sorted.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}
