package ledger_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/ledger"
)

// envNoProcCache switches the test binary into the helper of
// TestRecordStartWithoutProc: the cache dir to write a run in.
const envNoProcCache = "RIGHTSIZE_LEDGER_TEST_NOPROC_CACHE"

// TestRecordStartWithoutProcHelper is not a test: it writes one run in
// the cache dir it is given, and says its id.
func TestRecordStartWithoutProcHelper(t *testing.T) {
	cache := os.Getenv(envNoProcCache)
	if cache == "" {
		t.Skip("helper process for TestRecordStartWithoutProc only")
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		proctest.Say("error", "/proc is mounted")
		return
	}
	r, err := ledger.NewRun(cache, ledger.Owner{Backend: "docker"})
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
		proctest.TestArgv("TestRecordStartWithoutProcHelper")...)
	h := proctest.StartHelper(t, proctest.Spec{Name: "helper without /proc", Argv: argv, Env: proctest.Environ(nil, envNoProcCache+"="+cache)})
	real, ok, err := ledger.Lookup(h.Cmd.Process.Pid)
	if err != nil || !ok {
		t.Fatalf("look up the helper, pid %d: %v (found %v)", h.Cmd.Process.Pid, err, ok)
	}
	if msg := h.Expect("error"); msg != "" {
		t.Fatalf("helper: %s\n%s", msg, h.Output())
	}
	id := h.Expect("run")
	h.Finish()

	data, err := os.ReadFile(filepath.Join(cache, ledger.RunsDir, id+ledger.RecordExt))
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
