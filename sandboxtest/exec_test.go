package sandboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// A command run in a test's sandbox: its fate and its output, and nothing
// of it left running whatever ends the test.
// Environment of TestExecOwnerHelper, set by TestExecOwnerKilled.
const (
	envOwnerHelper = "RZ_TEST_EXEC_OWNER"
	envOwnerImage  = "RZ_TEST_EXEC_OWNER_IMAGE"
)

// keepAliveSpec is a keep-alive sandbox of this test's alone (the nonce
// makes its name). Nothing reaps a keep-alive sandbox, so should this test
// binary be killed before its cleanup removes it, it removes itself: its
// PID 1 ends after 5 minutes and the engine removes it then.
func keepAliveSpec(image, nonce string) sandboxtest.Spec {
	return sandboxtest.Spec{
		Image: image,
		Cmd:   []string{"sleep", "300"},
		Reuse: true,
		// What Customize changes, named: it enters the identity.
		ReuseKey: "auto-remove",
		Env:      map[string]string{"RZ_TEST_NONCE": nonce},
		Customize: []testcontainers.ContainerCustomizer{
			testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.AutoRemove = true }),
		},
	}
}

// TestExecOwnerKilled: the process that runs an exec in a keep-alive
// container is SIGKILLed; the exec's processes must be gone within 2 s,
// and the container must still run.
func TestExecOwnerKilled(t *testing.T) {
	img := testimage.Busybox(t)
	d := execDriver(t)
	nonce := fmt.Sprintf("owner-%d-%d", os.Getpid(), time.Now().UnixNano())
	name := ledger.ReuseName(sandboxtest.ReuseIdentity(keepAliveSpec(img, nonce)).Hash())
	t.Cleanup(func() { execRemove(t, d, name) })

	owner := proctest.StartHelper(t, proctest.Spec{
		Name: "the owner process",
		Argv: proctest.TestArgv("TestExecOwnerHelper"),
		Env: proctest.Environ(nil,
			envOwnerHelper+"="+nonce,
			envOwnerImage+"="+img,
			sandboxtest.EnvReuse+"=1",
			// Its ledger and keep-alive registry go where this test's
			// TempDir removes them; main_test.go leaves that setting alone.
			"RIGHTSIZE_CACHE_DIR="+t.TempDir(),
			"TMPDIR="+t.TempDir(), // and its keep-alive use lock (ledger.UseDir)
			"RIGHTSIZE_TEST_KEEP_ENV=1",
		),
	})
	// It says ready once its exec runs.
	if got := owner.Expect("ready"); got != name {
		t.Fatalf("the owner process runs its exec in %s, want %s", got, name)
	}
	if got := yesRunning(t, d, name); len(got) != 1 {
		t.Fatalf("before the kill, yes runs %d times in %s: %q", len(got), name, execOthers(t, d, name))
	}

	pid1 := execPID1(t, d, name)
	killed := time.Now()
	if err := owner.Kill(); err != nil {
		t.Fatal(err)
	}
	var left []string
	polls := 0
	gone := proctest.Poll(2*time.Second, func() bool {
		polls++
		left = execOthersThan(t, d, name, pid1)
		return len(left) == 0
	})
	took := time.Since(killed)
	if !gone {
		t.Fatalf("2 s after its owner was SIGKILLed, %s still runs %q", name, left)
	}
	t.Logf("owner SIGKILLed → the exec's processes gone in %v (seen on poll %d of docker top)", took.Round(time.Millisecond), polls)
	res, err := d.Client().ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Container.State == nil || !res.Container.State.Running {
		t.Errorf("the keep-alive container %s must outlive its owner and the exec; state %+v", name, res.Container.State)
	}
}

const yesScript = "yes >/dev/null"

// yesRunning finds the exec's yes: busybox sh runs it in its own process
// without an exec (yes is a NOEXEC applet), so the command line stays the
// shell's.
func yesRunning(t *testing.T, d *docker.Driver, name string) []string {
	return append(execRunning(t, d, name, "yes"), execRunning(t, d, name, "sh -c "+yesScript)...)
}

// TestExecOwnerHelper is the owner process of TestExecOwnerKilled: it
// runs yes in the keep-alive sandbox through Exec, says so, and waits to
// be killed.
func TestExecOwnerHelper(t *testing.T) {
	nonce := os.Getenv(envOwnerHelper)
	if nonce == "" {
		t.Skip("the owner process of TestExecOwnerKilled; runs only as that")
	}
	g := sandboxtest.Start(t, keepAliveSpec(os.Getenv(envOwnerImage), nonce))
	d := g.Sandbox().(*docker.Sandbox).Driver()
	go func() {
		if proctest.Poll(30*time.Second, func() bool { return len(yesRunning(t, d, g.Name())) > 0 }) {
			proctest.Say("ready", g.Name())
		}
	}()
	res, err := g.Exec(context.Background(), []string{"sh", "-c", yesScript})
	t.Errorf("the exec ended while its owner lived: %v, %v", res, err)
}

// TestExecTrapOnTimeout: the context's deadline ends the command with
// SIGTERM and a grace, so its EXIT trap runs. busybox sh runs EXIT traps
// on exit only, hence the TERM trap.
func TestExecTrapOnTimeout(t *testing.T) {
	g := sandboxtest.Start(t, busyboxSpec(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := g.Exec(ctx, []string{"sh", "-c", "trap 'echo trapped > /tmp/marker' EXIT; trap 'exit 143' TERM; sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ending != sandboxtest.Killed || !errors.Is(res.Cause, context.DeadlineExceeded) || res.ExitCode != -1 {
		t.Errorf("got %v (cause %v, code %d); want killed because the context's deadline passed, code -1", res, res.Cause, res.ExitCode)
	}
	marker := execMust(t, g, "cat", "/tmp/marker")
	if marker.Stdout != "trapped\n" {
		t.Errorf("the EXIT trap did not run within the grace: cat /tmp/marker gave %v", marker)
	}
}

// TestExecBackgroundChildCancelled: a child the command forked into the
// background goes with the group.
func TestExecBackgroundChildCancelled(t *testing.T) {
	g := sandboxtest.Start(t, busyboxSpec(t))
	d := g.Sandbox().(*docker.Sandbox).Driver()
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan sandboxtest.ExecResult, 1)
	go func() {
		res, err := g.Exec(ctx, []string{"sh", "-c", "sleep 3201 & sleep 3202"})
		if err != nil {
			t.Error(err)
		}
		ended <- res
	}()
	if !proctest.Poll(10*time.Second, func() bool {
		return len(execRunning(t, d, g.Name(), "sleep 3201")) == 1 && len(execRunning(t, d, g.Name(), "sleep 3202")) == 1
	}) {
		cancel()
		t.Fatalf("the sleeps never ran: %q", execOthers(t, d, g.Name()))
	}
	cancel()
	res := <-ended
	if res.Ending != sandboxtest.Killed || !errors.Is(res.Cause, context.Canceled) {
		t.Errorf("got %v; want killed because the context was cancelled", res)
	}
	if left := execOthers(t, d, g.Name()); len(left) > 0 {
		t.Errorf("after the cancel, the sandbox still runs %q", left)
	}
}

func TestExecExitCodesAndOutput(t *testing.T) {
	g := sandboxtest.Start(t, withEnv(busyboxSpec(t), "RZ_FROM_SPEC", "spec"))
	cases := []struct {
		name           string
		cmd            []string
		opts           []sandboxtest.ExecOption
		code           int
		stdout, stderr string
		reason         string
	}{
		{"zero", []string{"true"}, nil, 0, "", "", "success"},
		{"three", []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, nil, 3, "out\n", "err\n", "its own code, stdout and stderr apart"},
		{"missing", []string{"rz-no-such-command"}, nil, 127, "", "rz-exec: exec: line 0: rz-no-such-command: not found\n", "the shell's code for a command not found"},
		{"options", []string{"sh", "-c", "echo $RZ_FROM_SPEC $RZ_A; pwd; id -u"},
			[]sandboxtest.ExecOption{sandboxtest.WithEnv(map[string]string{"RZ_A": "a"}), sandboxtest.WithWorkingDir("/tmp"), sandboxtest.WithUser("65534")},
			0, "spec a\n/tmp\n65534\n", "", "the sandbox's environment plus WithEnv, WithWorkingDir, WithUser"},
	}
	for _, c := range cases {
		res, err := g.Exec(context.Background(), c.cmd, c.opts...)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if res.Ending != sandboxtest.Exited || res.ExitCode != c.code || res.Stdout != c.stdout || res.Stderr != c.stderr || res.Cause != nil {
			t.Errorf("%s: got %v; want exited %d with stdout %q, stderr %q: %s", c.name, res, c.code, c.stdout, c.stderr, c.reason)
		}
	}
	res := execMust(t, g, "sh", "-c", "echo out; echo err >&2; exit 3")
	if s := res.String(); !strings.Contains(s, "exited 3") || !strings.Contains(s, "stdout:\nout") || !strings.Contains(s, "stderr:\nerr") {
		t.Errorf("String() = %q; a failure message needs the fate and both streams", s)
	}
}

func TestExecOutputLimit(t *testing.T) {
	g := sandboxtest.Start(t, busyboxSpec(t))
	res, err := g.Exec(context.Background(), []string{"sh", "-c", "yes | head -c 100000; yes e | head -c 100000 >&2; echo done >&2; exit 4"}, sandboxtest.WithOutputLimit(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 100 || !res.StdoutTruncated || len(res.Stderr) != 100 || !res.StderrTruncated {
		t.Errorf("kept %d and %d bytes, truncated %v and %v; want 100 of each, both truncated",
			len(res.Stdout), len(res.Stderr), res.StdoutTruncated, res.StderrTruncated)
	}
	if res.Ending != sandboxtest.Exited || res.ExitCode != 4 {
		t.Errorf("got %v; past the limit the command must run on to its own end", res)
	}
	if !strings.Contains(res.String(), "truncated") {
		t.Errorf("String() = %q; it must say the output was truncated", res.String())
	}
	short := execMust(t, g, "echo", "short")
	if short.StdoutTruncated || short.Stdout != "short\n" {
		t.Errorf("under the default limit: %v", short)
	}
}

// TestExecGuardStop: Stop ends a running exec before it stops the
// sandbox; a keep-alive sandbox, which Stop leaves running, shows the
// exec's processes are gone and not merely removed with the container.
func TestExecGuardStop(t *testing.T) {
	img := testimage.Busybox(t)
	d := execDriver(t)
	t.Setenv(sandboxtest.EnvReuse, "1")
	t.Setenv("TMPDIR", t.TempDir()) // the keep-alive use lock (ledger.UseDir): the test's own
	spec := keepAliveSpec(img, fmt.Sprintf("stop-%d-%d", os.Getpid(), time.Now().UnixNano()))
	name := ledger.ReuseName(sandboxtest.ReuseIdentity(spec).Hash())
	t.Cleanup(func() { execRemove(t, d, name) })
	g := sandboxtest.Start(t, spec)

	ended := make(chan sandboxtest.ExecResult, 1)
	go func() {
		res, err := g.Exec(context.Background(), []string{"sh", "-c", "sleep 3301"})
		if err != nil {
			t.Error(err)
		}
		ended <- res
	}()
	if !proctest.Poll(10*time.Second, func() bool { return len(execRunning(t, d, name, "sleep 3301")) == 1 }) {
		t.Fatalf("the sleep never ran: %q", execOthers(t, d, name))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-ended:
		if res.Ending != sandboxtest.Killed || !errors.Is(res.Cause, sandboxtest.ErrGuardStopped) {
			t.Errorf("got %v; want killed because the guard stopped", res)
		}
	case <-time.After(time.Second):
		// Stop waits for the exec's end; the goroutine reports it a moment
		// after.
		t.Fatal("Exec did not return within 1 s of Stop")
	}
	if left := execOthers(t, d, name); len(left) > 0 {
		t.Errorf("after Stop, the keep-alive sandbox still runs %q", left)
	}
	if _, err := g.Exec(context.Background(), []string{"true"}); !errors.Is(err, sandboxtest.ErrGuardStopped) {
		t.Errorf("Exec after Stop: %v; want ErrGuardStopped", err)
	}
}

func TestExecNoShell(t *testing.T) {
	g := sandboxtest.Start(t, sandboxtest.Spec{Image: testimage.NoShell(t)})
	res, err := g.Exec(context.Background(), []string{"true"})
	if !errors.Is(err, sandboxtest.ErrNoShell) {
		t.Fatalf("Exec in an image without a shell: %v (%v); want ErrNoShell", err, res)
	}
	for _, want := range []string{"no /bin/sh", "setsid", "busybox"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if res.Ending != sandboxtest.Unconfirmed {
		t.Errorf("Ending %v for a command that never ran; want Unknown", res.Ending)
	}
}

func TestExecWithStdin(t *testing.T) {
	g := sandboxtest.Start(t, busyboxSpec(t))
	res, err := g.Exec(context.Background(), []string{"cat"}, sandboxtest.WithStdin(strings.NewReader("line one\nline two\n")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Ending != sandboxtest.Exited || res.ExitCode != 0 || res.Stdout != "line one\nline two\n" {
		t.Errorf("cat with stdin: %v", res)
	}
}

// TestExecWithStdinCancelled: without the lease, a cancelled command is
// ended through its process group.
func TestExecWithStdinCancelled(t *testing.T) {
	g := sandboxtest.Start(t, busyboxSpec(t))
	d := g.Sandbox().(*docker.Sandbox).Driver()
	stdin, feed := io.Pipe()
	defer feed.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan sandboxtest.ExecResult, 1)
	go func() {
		res, err := g.Exec(ctx, []string{"sh", "-c", "cat; sleep 3401"}, sandboxtest.WithStdin(stdin))
		if err != nil {
			t.Error(err)
		}
		ended <- res
	}()
	if !proctest.Poll(10*time.Second, func() bool { return len(execRunning(t, d, g.Name(), "cat")) == 1 }) {
		cancel()
		t.Fatalf("cat never ran: %q", execOthers(t, d, g.Name()))
	}
	cancel()
	res := <-ended
	if res.Ending != sandboxtest.Killed || !errors.Is(res.Cause, context.Canceled) {
		t.Errorf("got %v; want killed because the context was cancelled", res)
	}
	if left := execOthers(t, d, g.Name()); len(left) > 0 {
		t.Errorf("after the cancel, the sandbox still runs %q", left)
	}
}

// TestExecLeftoversEnded: a command that exits leaving a child running
// in its group takes the child with it.
func TestExecLeftoversEnded(t *testing.T) {
	g := sandboxtest.Start(t, busyboxSpec(t))
	d := g.Sandbox().(*docker.Sandbox).Driver()
	res := execMust(t, g, "sh", "-c", "sleep 3501 & echo $! > /tmp/child; exit 4")
	if res.Ending != sandboxtest.Exited || res.ExitCode != 4 {
		t.Errorf("got %v; want exited 4", res)
	}
	if left := execOthers(t, d, g.Name()); len(left) > 0 {
		t.Errorf("the command exited, but the sandbox still runs %q", left)
	}
	if child := execMust(t, g, "cat", "/tmp/child"); child.Stdout == "" {
		t.Errorf("the background child never started: %v", child)
	}
}

// Helpers.

// busyboxSpec is an ordinary busybox sandbox. Its PID 1 (sleep) ignores
// SIGTERM, so a grace would only cost time.
func busyboxSpec(t *testing.T) sandboxtest.Spec {
	return sandboxtest.Spec{Image: testimage.Busybox(t), StopGrace: time.Millisecond}
}

func withEnv(s sandboxtest.Spec, k, v string) sandboxtest.Spec {
	s.Env = map[string]string{k: v}
	return s
}

func execMust(t *testing.T, g *sandboxtest.Guard, cmd ...string) sandboxtest.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := g.Exec(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func execDriver(t *testing.T) *docker.Driver {
	t.Helper()
	testimage.Engine(t)
	d, err := docker.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func execRemove(t *testing.T, d *docker.Driver, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.Client().ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}); err != nil && !strings.Contains(strings.ToLower(err.Error()), "no such container") {
		t.Errorf("removing %s: %v", name, err)
	}
}

// execTop lists "pid command line" for every process of the container.
func execTop(t *testing.T, d *docker.Driver, name string) [][2]string {
	procs, err := testimage.Processes(context.Background(), d.Client(), name)
	if err != nil {
		t.Error(err)
	}
	return procs
}

// execRunning lists the processes whose command line is exactly args.
func execRunning(t *testing.T, d *docker.Driver, name, args string) []string {
	var out []string
	for _, p := range execTop(t, d, name) {
		if p[1] == args {
			out = append(out, p[0]+" "+p[1])
		}
	}
	return out
}

// execOthers lists every process but the sandbox's PID 1: the execs'
// wrappers and commands. An exec's zombies are not listed: the engine
// lists a container's processes from its cgroup, which they have left.
func execOthers(t *testing.T, d *docker.Driver, name string) []string {
	return execOthersThan(t, d, name, execPID1(t, d, name))
}

// execPID1 is the sandbox's PID 1 as the engine's host sees it.
func execPID1(t *testing.T, d *docker.Driver, name string) string {
	in, err := d.Client().ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	if err != nil || in.Container.State == nil {
		t.Errorf("inspect %s: %v", name, err)
		return ""
	}
	return strconv.Itoa(in.Container.State.Pid)
}

// execOthersThan lists the processes but pid1. Docker's top gives the
// host's pids, Podman's those of the container, where PID 1 is 1.
func execOthersThan(t *testing.T, d *docker.Driver, name, pid1 string) []string {
	var out []string
	for _, p := range execTop(t, d, name) {
		if p[0] != pid1 && p[0] != "1" {
			out = append(out, p[0]+" "+p[1])
		}
	}
	return out
}
