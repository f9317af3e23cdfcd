package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// When this variable is set, the test binary is the server: the signal tests
// need a process of their own to send SIGTERM to.
const helperEnv = "RIGHTSIZE_TEST_SERVER_HELPER"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(helperEnv); ok {
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

func get(t *testing.T, port string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + port + "/anything")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("port %s: status %d", port, resp.StatusCode)
	}
	return string(b)
}

// start runs the server as a child process and waits for its "ready".
func start(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// GORACE: a race-enabled child would otherwise sleep 1 s on exit.
	cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join(args, " "), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("first line %q (%v), want ready", line, err)
	}
	return cmd
}

func exitCode(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		t.Fatalf("still running after %v", within)
		return -1
	}
}

func TestServesEveryPort(t *testing.T) {
	p1, p2 := freePort(t), freePort(t)
	start(t, p1, p2)
	for _, p := range []string{p1, p2} {
		if got, want := get(t, p), "rightsize-test-server port="+p+"\n"; got != want {
			t.Errorf("port %s answered %q, want %q", p, got, want)
		}
	}
}

func TestExitsZeroOnSIGTERM(t *testing.T) {
	cmd := start(t, freePort(t))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd, 5*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

func TestIgnoreTerm(t *testing.T) {
	port := freePort(t)
	cmd := start(t, "-ignore-term", port)
	// An ignored signal is discarded as it is sent: once the server says
	// it ignores SIGTERM, the SIGTERM below cannot end it, and the GET
	// after it proves it did not. (Without -ignore-term the status shows no
	// such bit, and the SIGTERM ends the server: TestExitsZeroOnSIGTERM.)
	if !ignores(t, cmd.Process.Pid, syscall.SIGTERM) {
		t.Fatal("the server does not ignore SIGTERM")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	get(t, port) // still serving
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd, 5*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGINT, want 0", code)
	}
}

// ignores reports whether process pid ignores sig, as its status in /proc
// says (SigIgn, a hexadecimal mask of signals 1…64).
func ignores(t *testing.T, pid int, sig syscall.Signal) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc status to read the signal mask from: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
			var mask uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%x", &mask); err != nil {
				t.Fatalf("SigIgn %q: %v", v, err)
			}
			return mask&(1<<(uint(sig)-1)) != 0
		}
	}
	t.Fatalf("no SigIgn line in /proc/%d/status", pid)
	return false
}

func TestExitAfter(t *testing.T) {
	cmd := start(t, "-exit-after", "100ms", "-exit-code", "3", freePort(t))
	if code := exitCode(t, cmd, 5*time.Second); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
}

func TestAllocStopsAtMax(t *testing.T) {
	allocate(8 << 20)
	if len(allocated) != 8 {
		t.Errorf("allocated %d chunks of 1 MiB, want 8", len(allocated))
	}
	allocated = nil
}

func TestBadPort(t *testing.T) {
	if code := run([]string{"http"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("exit code %d for a bad port, want 2", code)
	}
}
