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
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/procid"
)

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
	if !procid.InInitialPidNamespace() {
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
