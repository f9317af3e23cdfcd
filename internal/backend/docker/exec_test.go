package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// The wrapper's own tests are package backend's (execwrap_test.go); the
// engine tests use containers made with the API directly and reached by
// name, as an adopted keep-alive container is.

func TestStartFailure(t *testing.T) {
	noShell := "OCI runtime exec failed: exec failed: unable to start container process: exec: \"/bin/sh\": stat /bin/sh: no such file or directory: unknown\r\n"
	cases := []struct {
		name           string
		code           int
		stdout, stderr string
		want           error
		reason         string
	}{
		{"no shell", 126, noShell, "", ErrNoShell, "the engine's words for a missing /bin/sh"},
		{"no setsid", 121, "", "rz-exec: setsid: not found; Exec needs it\n", ErrNoSetsid, "the wrapper's own code and message"},
		{"user 121", 121, "", "something else\n", nil, "a command's own 121 is not a missing setsid"},
		{"user 126", 126, "permission denied\n", "", nil, "a command's own 126 is not the engine's"},
		{"exited", 0, "", "", nil, "a normal end"},
	}
	for _, c := range cases {
		err := startFailure(c.code, []byte(c.stdout), []byte(c.stderr))
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: startFailure = %v, want %v: %s", c.name, err, c.want, c.reason)
		}
	}
	err := startFailure(126, []byte(noShell), nil)
	if err == nil || !strings.Contains(err.Error(), "no /bin/sh") || !strings.Contains(err.Error(), "busybox is enough") {
		t.Errorf("the no-shell error %q must name what is missing and what is enough", err)
	}
}

// The engine tests.

var ctrSeq atomic.Int64

// testContainer starts a container from ref with the API (no rightsize
// name, no labels: nothing here is the ledger's) and removes it when the
// test ends.
func testContainer(t *testing.T, d *Driver, ref string) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("rz-exectest-%d-%d", os.Getpid(), ctrSeq.Add(1))
	_, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   name,
		Config: &container.Config{Image: ref},
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := d.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}); err != nil && !errors.Is(classify("", err), backend.ErrNotFound) {
			t.Errorf("removing %s: %v", name, err)
		}
	})
	if err != nil {
		t.Fatalf("creating %s from %s: %v", name, ref, err)
	}
	if _, err := d.cli.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	return name
}

// openDriver connects to the engine; call it after testimage, which
// skips or fails the test with a better message when there is none.
func openDriver(t *testing.T) *Driver {
	t.Helper()
	testimage.Engine(t)
	d, err := Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// busyboxSandbox is a running busybox container reached by name, as a
// keep-alive container adopted from another process is.
func busyboxSandbox(t *testing.T) *Sandbox {
	t.Helper()
	ref := testimage.Busybox(t)
	d := openDriver(t)
	return d.SandboxFor(testContainer(t, d, ref))
}

// processes lists "pid command line" of every process in the container
// but its PID 1 (sleep 3600). The wrapper's own lines hold the whole
// script, and the command's words after it.
func processes(t *testing.T, s *Sandbox) []string {
	t.Helper()
	procs, err := testimage.Processes(context.Background(), s.d.cli, s.name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		if p[1] != "sleep 3600" {
			out = append(out, p[0]+" "+p[1])
		}
	}
	return out
}

// running lists the processes whose command line is exactly args.
func running(procs []string, args string) []string {
	var out []string
	for _, p := range procs {
		if _, a, _ := strings.Cut(p, " "); a == args {
			out = append(out, p)
		}
	}
	return out
}

func TestExecExitCodesAndOutput(t *testing.T) {
	s := busyboxSandbox(t)
	cases := []struct {
		name           string
		cmd            []string
		code           int
		stdout, stderr string
		reason         string
	}{
		{"zero", []string{"echo", "hello"}, 0, "hello\n", "", "a plain argv, no shell involved"},
		{"three", []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, 3, "out\n", "err\n", "the command's code, and its streams apart"},
		{"missing", []string{"no-such-command-rz"}, 127, "", "rz-exec: exec: line 0: no-such-command-rz: not found\n", "the shell's code for a missing command"},
		{"words", []string{"printf", "%s|", "a b", "$HOME", "'; exit 9"}, 0, "a b|$HOME|'; exit 9|", "", "every word arrives as it was, never as shell text"},
	}
	for _, c := range cases {
		res, err := s.Exec(context.Background(), c.cmd, ExecOptions{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if res.ExitCode != c.code || string(res.Stdout) != c.stdout || string(res.Stderr) != c.stderr || res.Interrupted != nil {
			t.Errorf("%s: exit %d, stdout %q, stderr %q, interrupted %v; want %d, %q, %q, nil: %s",
				c.name, res.ExitCode, res.Stdout, res.Stderr, res.Interrupted, c.code, c.stdout, c.stderr, c.reason)
		}
		if res.PGID <= 1 {
			t.Errorf("%s: pgid %d; the wrapper reports the command's group", c.name, res.PGID)
		}
	}
	if left := processes(t, s); len(left) > 0 {
		t.Errorf("after the execs, the container still runs %q", left)
	}
}

func TestExecOptions(t *testing.T) {
	s := busyboxSandbox(t)
	res, err := s.Exec(context.Background(), []string{"sh", "-c", "echo $RZ_A; pwd; id -u"},
		ExecOptions{Env: []string{"RZ_A=b c"}, WorkingDir: "/tmp", User: "65534"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "b c\n/tmp\n65534\n"; string(res.Stdout) != want {
		t.Errorf("stdout %q, want %q (env, working dir, user)", res.Stdout, want)
	}
}

func TestExecTruncation(t *testing.T) {
	s := busyboxSandbox(t)
	// 200 KB on each stream, kept to 1000 bytes; the command must still
	// run to its end (its exit code says so).
	res, err := s.Exec(context.Background(), []string{"sh", "-c", "yes o | head -c 200000; yes e | head -c 200000 >&2; exit 5"}, ExecOptions{OutputLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1000 || !res.StdoutTruncated || len(res.Stderr) != 1000 || !res.StderrTruncated || res.ExitCode != 5 {
		t.Errorf("stdout %d bytes (truncated %v), stderr %d (truncated %v), exit %d; want 1000 true 1000 true 5",
			len(res.Stdout), res.StdoutTruncated, len(res.Stderr), res.StderrTruncated, res.ExitCode)
	}
	if !strings.HasPrefix(string(res.Stderr), "e\ne\n") {
		t.Errorf("stderr starts %q: the wrapper's marker must not take the room", res.Stderr[:10])
	}
	small, err := s.Exec(context.Background(), []string{"echo", "short"}, ExecOptions{OutputLimit: 1000})
	if err != nil || small.StdoutTruncated || string(small.Stdout) != "short\n" {
		t.Errorf("short output: %q truncated %v (%v)", small.Stdout, small.StdoutTruncated, err)
	}
}

func TestExecCancelEndsGroup(t *testing.T) {
	s := busyboxSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	wait := execInBackground(ctx, s, "sleep 3101 & sleep 3102")
	if !proctest.Poll(10*time.Second, func() bool {
		procs := processes(t, s)
		return len(running(procs, "sleep 3101")) == 1 && len(running(procs, "sleep 3102")) == 1
	}) {
		t.Fatalf("the two sleeps never ran: %q", processes(t, s))
	}
	start := time.Now()
	cancel()
	res, err := wait()
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res.Interrupted, context.Canceled) {
		t.Errorf("Interrupted = %v, want context.Canceled", res.Interrupted)
	}
	if left := processes(t, s); len(left) > 0 {
		t.Errorf("after the cancel, the container still runs %q", left)
	}
	if took > ExecGrace {
		t.Errorf("Exec returned %v after the cancel; sleep dies on SIGTERM, so well within the grace", took)
	}
	t.Logf("cancel → Exec returned in %v, exit %d", took, res.ExitCode)
}

func TestExecStdin(t *testing.T) {
	s := busyboxSandbox(t)
	res, err := s.Exec(context.Background(), []string{"cat"}, ExecOptions{Stdin: strings.NewReader("fed through stdin\n")})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "fed through stdin\n" || res.ExitCode != 0 {
		t.Errorf("cat gave %q, exit %d", res.Stdout, res.ExitCode)
	}
}

// blockingReader never returns until closed: a stdin that stays open.
type blockingReader struct{ closed chan struct{} }

func (b blockingReader) Read([]byte) (int, error) { <-b.closed; return 0, io.EOF }

func TestExecStdinCancelEndsGroup(t *testing.T) {
	s := busyboxSandbox(t)
	stdin := blockingReader{make(chan struct{})}
	defer close(stdin.closed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// The command ignores its stdin: only the group signal can end it.
	res, err := s.Exec(ctx, []string{"sh", "-c", "sleep 3103 </dev/null & sleep 3104 </dev/null"}, ExecOptions{Stdin: stdin})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res.Interrupted, context.DeadlineExceeded) {
		t.Errorf("Interrupted = %v, want the deadline", res.Interrupted)
	}
	if res.PGID <= 1 {
		t.Errorf("pgid %d: the command never started", res.PGID)
	}
	if left := processes(t, s); len(left) > 0 {
		t.Errorf("after the deadline, the container still runs %q", left)
	}
}

func TestExecNoShell(t *testing.T) {
	ref := testimage.NoShell(t)
	d := openDriver(t)
	s := d.SandboxFor(testContainer(t, d, ref))
	_, err := s.Exec(context.Background(), []string{"true"}, ExecOptions{})
	if !errors.Is(err, ErrNoShell) {
		t.Fatalf("Exec in an image with no shell: %v; want ErrNoShell", err)
	}
	if !strings.Contains(err.Error(), "no /bin/sh") {
		t.Errorf("error %q does not say what is missing", err)
	}
}

func TestExecAdopted(t *testing.T) {
	ref := testimage.Busybox(t)
	d := openDriver(t)
	name := testContainer(t, d, ref)
	sbx, err := d.Adopt(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sbx.(*Sandbox).Exec(context.Background(), []string{"echo", "adopted"}, ExecOptions{})
	if err != nil || string(res.Stdout) != "adopted\n" {
		t.Errorf("Exec in an adopted container: %q, %v", res.Stdout, err)
	}
}

func TestExecContextDoneBefore(t *testing.T) {
	s := busyboxSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Exec(ctx, []string{"true"}, ExecOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Exec with a context already done: %v, want context.Canceled", err)
	}
}

// TestExecCancelTermIgnored: a group that ignores SIGTERM gets the grace,
// then SIGKILL.
func TestExecCancelTermIgnored(t *testing.T) {
	s := busyboxSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	// The ignored TERM is inherited by the sleep as well.
	wait := execInBackground(ctx, s, "trap '' TERM; sleep 3105")
	if !proctest.Poll(10*time.Second, func() bool { return len(running(processes(t, s), "sleep 3105")) == 1 }) {
		cancel()
		t.Fatalf("the sleep never ran: %q", processes(t, s))
	}
	start := time.Now()
	cancel()
	res, err := wait()
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted == nil || res.ExitCode != 137 {
		t.Errorf("interrupted %v, exit %d; want interrupted, and 137 from the SIGKILL", res.Interrupted, res.ExitCode)
	}
	if took < ExecGrace || took > ExecGrace+3*time.Second {
		t.Errorf("Exec returned %v after the cancel; want the grace (%v), then SIGKILL at once", took, ExecGrace)
	}
	if left := processes(t, s); len(left) > 0 {
		t.Errorf("after the SIGKILL, the container still runs %q", left)
	}
}

// execInBackground runs script with sh -c through s.Exec in a goroutine;
// wait returns what Exec returned, once it has.
func execInBackground(ctx context.Context, s *Sandbox, script string) (wait func() (ExecResult, error)) {
	done := make(chan struct{})
	var res ExecResult
	var err error
	go func() {
		defer close(done)
		res, err = s.Exec(ctx, []string{"sh", "-c", script}, ExecOptions{})
	}()
	return func() (ExecResult, error) {
		<-done
		return res, err
	}
}
