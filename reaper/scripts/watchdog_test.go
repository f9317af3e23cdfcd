//go:build unix

package scripts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/proctest"
)

// These tests run the embedded watchdog.sh for real, under every POSIX
// shell it promises to support, with PROGRAM a small shell program that
// writes down what it was given: its stdin, and that it ran.

type shell struct {
	name string
	argv []string // the interpreter and its flags
	// maxRSSKiB bounds VmRSS while waiting (0: logged, not asserted).
	maxRSSKiB int
}

var shells = []shell{
	{name: "dash", argv: []string{"/usr/bin/dash"}, maxRSSKiB: 2048},
	{name: "bash-posix", argv: []string{"/bin/bash", "--posix"}},
	{name: "busybox-ash", argv: []string{"/bin/busybox", "ash"}, maxRSSKiB: 2048},
}

// forEachShell runs fn once per shell, in parallel.
func forEachShell(t *testing.T, fn func(t *testing.T, sh shell)) {
	t.Helper()
	for _, sh := range shells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := os.Stat(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed here (%v): watchdog.sh is not tested under %s", sh.argv[0], err, sh.name)
			}
			t.Parallel()
			fn(t, sh)
		})
	}
}

// programText is a PROGRAM that writes down its arguments, copies its stdin
// to out and exits 7.
const programText = "#!/bin/sh\nprintf '%s\\n' \"$@\" >\"$RZ_ARGS_OUT\"\ncat >\"$RZ_OUT.tmp\" && mv \"$RZ_OUT.tmp\" \"$RZ_OUT\"\nexit 7\n"

// waiter is one spawned watchdog.sh and what its PROGRAM leaves.
type waiter struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   *os.File
	program string
	out     string
	done    chan struct{}
	err     error
	stderr  bytes.Buffer
}

// spawn starts watchdog.sh as the reaper does: the text itself, the run
// as its argument, PROGRAM in its environment and on descriptor 3, an
// unlinked file on 4 and 5.
func spawn(t *testing.T, sh shell) *waiter {
	t.Helper()
	return spawnWith(t, sh, nil, []string{"ab12cd34"})
}

// spawnWith is spawn with these arguments, and PROGRAM's variable set to
// *program (to the program spawn writes when nil).
func spawnWith(t *testing.T, sh shell, program *string, argv []string) *waiter {
	t.Helper()
	dir := t.TempDir()
	w := &waiter{t: t, program: filepath.Join(dir, "test binary"), out: filepath.Join(dir, "got"), done: make(chan struct{})}
	must(t, os.WriteFile(w.program, []byte(programText), 0o755))
	exe, err := os.Open(w.program)
	must(t, err)
	told := filepath.Join(dir, "told")
	wr, err := os.OpenFile(told, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	must(t, err)
	rd, err := os.Open(told)
	must(t, err)
	must(t, os.Remove(told))
	r, stdin, err := os.Pipe()
	must(t, err)
	args := append(append(append([]string{}, sh.argv[1:]...), "-c", string(WatchdogSh), "rightsize-watchdog"), argv...)
	if program == nil {
		program = &w.program
	}
	w.cmd = exec.Command(sh.argv[0], args...)
	w.cmd.Stdin, w.cmd.Stderr = r, &w.stderr
	w.cmd.ExtraFiles = []*os.File{exe, wr, rd}
	w.cmd.Env = append(os.Environ(), "RZ_OUT="+w.out, "RZ_ARGS_OUT="+w.out+".args", "RIGHTSIZE_WATCHDOG_PROGRAM="+*program)
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	must(t, w.cmd.Start())
	for _, f := range []*os.File{r, exe, wr, rd} {
		f.Close()
	}
	w.stdin = stdin
	go func() { w.err = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		w.stdin.Close()
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	})
	return w
}

// exit waits for the watchdog to end and returns its exit code.
func (w *waiter) exit() int {
	w.t.Helper()
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		w.t.Fatalf("the watchdog did not end within 10 s\nstderr: %s", w.stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(w.err, &ee) {
		return ee.ExitCode()
	}
	if w.err != nil {
		w.t.Fatal(w.err)
	}
	return 0
}

func (w *waiter) waitReading() {
	w.t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	proctest.WaitUntil(w.t, 10*time.Second, "the watchdog to wait on its stdin", func() bool {
		waiting, _ := proctest.WaitingOnStdin(w.cmd.Process.Pid)
		return waiting
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every line reaches PROGRAM as it was told, hostile ones included, and
// only at EOF; none is run on the way; PROGRAM's exit is the watchdog's.
func TestLinesReachProgramAtEOF(t *testing.T) {
	forEachShell(t, func(t *testing.T, sh shell) {
		w := spawn(t, sh)
		pwned := filepath.Join(t.TempDir(), "PWNED")
		lines := []string{
			"+s 0123456789abcdef rz-ab12cd34-0",
			"+n 0123456789abcdee rz-ab12cd34-net",
			"-s 0123456789abcdef rz-ab12cd34-0",
			"+s $(touch " + pwned + ") `touch " + pwned + "`",
			"  leading and trailing spaces  ",
			`back\slash \n *`,
			"",
			"+x 0123456789abcded rz-ab12cd34-1",
		}
		want := strings.Join(lines, "\n") + "\n" + "+s last-line-without-newline rz-ab12cd34-2\n"
		for i, l := range lines {
			if _, err := w.stdin.WriteString(l + "\n"); err != nil {
				t.Fatal(err)
			}
			if i == 3 {
				w.waitReading()
			}
		}
		_, err := w.stdin.WriteString("+s last-line-without-newline rz-ab12cd34-2")
		must(t, err)
		w.waitReading()
		if _, err := os.Stat(w.out); err == nil {
			t.Fatal("PROGRAM ran while the owner lives")
		}
		w.stdin.Close()
		if code := w.exit(); code != 7 {
			t.Errorf("exit %d, want PROGRAM's 7\nstderr: %s", code, w.stderr.String())
		}
		got, err := os.ReadFile(w.out)
		must(t, err)
		if string(got) != want {
			t.Errorf("PROGRAM's stdin\n got  %q\n want %q", got, want)
		}
		if _, err := os.Stat(pwned); err == nil {
			t.Error("a told line was run")
		}
		if args, err := os.ReadFile(w.out + ".args"); err != nil || string(args) != "rightsize-watchdog\nreaping\nab12cd34\n" {
			t.Errorf("PROGRAM's arguments %q (%v), want rightsize-watchdog reaping ab12cd34", args, err)
		}
	})
}

// While it waits, nothing of the watchdog's command line names PROGRAM:
// a harness that ends the leftover test binaries by their command line
// (`pkill -f '\.test$'`) must not end a watchdog with them.
func TestCommandLineNamesNoProgram(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	forEachShell(t, func(t *testing.T, sh shell) {
		w := spawn(t, sh)
		w.waitReading()
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", w.cmd.Process.Pid))
		must(t, err)
		line := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(line, w.program) || strings.Contains(line, ".test") || !strings.Contains(line, "rightsize-watchdog ab12cd34") {
			t.Errorf("the waiting watchdog's command line names PROGRAM, or not itself and its run:\n%s", line)
		}
	})
}

// On Linux, PROGRAM runs through descriptor 3: a test binary that `go
// test` deleted once its process died still serves.
func TestDeletedProgramStillRuns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("elsewhere PROGRAM runs by its path")
	}
	forEachShell(t, func(t *testing.T, sh shell) {
		w := spawn(t, sh)
		_, err := w.stdin.WriteString("+s 0123456789abcdef rz-ab12cd34-0\n")
		must(t, err)
		w.waitReading()
		must(t, os.Remove(w.program))
		w.stdin.Close()
		if code := w.exit(); code != 7 {
			t.Errorf("exit %d, want PROGRAM's 7\nstderr: %s", code, w.stderr.String())
		}
		if got, err := os.ReadFile(w.out); err != nil || string(got) != "+s 0123456789abcdef rz-ab12cd34-0\n" {
			t.Errorf("PROGRAM's stdin %q (%v)", got, err)
		}
	})
}

// Arguments are checked before waiting: nonsense exits 2 at once, while
// the owner still holds the pipe.
func TestBadArgumentsRefusedBeforeWaiting(t *testing.T) {
	forEachShell(t, func(t *testing.T, sh shell) {
		none, relative := "", "relative/test.bin"
		for _, tc := range []struct {
			program *string
			args    []string
		}{{nil, nil}, {nil, []string{""}}, {nil, []string{"ab12cd34", "/b"}}, {&relative, []string{"ab12cd34"}}, {&none, []string{"ab12cd34"}}} {
			w := spawnWith(t, sh, tc.program, tc.args)
			if code := w.exit(); code != 2 {
				t.Errorf("PROGRAM %v, args %q: exit %d, want 2", tc.program, tc.args, code)
			}
			if !strings.Contains(w.stderr.String(), "rightsize watchdog:") {
				t.Errorf("PROGRAM %v, args %q: stderr %q does not say why", tc.program, tc.args, w.stderr.String())
			}
		}
		// No descriptors 3 to 5.
		r, stdin, err := os.Pipe()
		must(t, err)
		defer stdin.Close()
		var stderr bytes.Buffer
		cmd := exec.Command(sh.argv[0], append(append([]string{}, sh.argv[1:]...), "-c", string(WatchdogSh), "rightsize-watchdog", "ab12cd34")...)
		cmd.Stdin, cmd.Stderr = r, &stderr
		cmd.Env = append(os.Environ(), "RIGHTSIZE_WATCHDOG_PROGRAM=/bin/true")
		err = cmd.Run()
		r.Close()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "descriptors") {
			t.Errorf("without descriptors: %v, stderr %q; want exit 2 saying why", err, stderr.String())
		}
	})
}

// A ^C, a hangup or a closed stderr aimed at the owner's terminal does not
// end the watchdog while it waits.
func TestIgnoresTerminalSignals(t *testing.T) {
	forEachShell(t, func(t *testing.T, sh shell) {
		w := spawn(t, sh)
		w.waitReading()
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE} {
			must(t, w.cmd.Process.Signal(sig))
		}
		// Each signal, were it not ignored, ends the shell at once; the
		// next line it reads proves it lives on.
		_, err := w.stdin.WriteString("+s 0123456789abcdef rz-ab12cd34-0\n")
		must(t, err)
		w.stdin.Close()
		if code := w.exit(); code != 7 {
			t.Errorf("exit %d after the signals, want PROGRAM's 7\nstderr: %s", code, w.stderr.String())
		}
	})
}

// While it waits, the watchdog is small and uses no CPU at all.
func TestWaitingFootprint(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	forEachShell(t, func(t *testing.T, sh shell) {
		w := spawn(t, sh)
		w.waitReading()
		pid := w.cmd.Process.Pid
		rss, err := proctest.VmRSSKiB(pid)
		must(t, err)
		cpu0 := cpuTicks(t, pid)
		time.Sleep(time.Second) // the measurement window, not a synchronisation
		cpu1 := cpuTicks(t, pid)
		t.Logf("%s waiting: VmRSS %d KiB, CPU %d ticks over 1 s", sh.name, rss, cpu1-cpu0)
		if cpu1 != cpu0 {
			t.Errorf("%d clock ticks of CPU in 1 s, want none", cpu1-cpu0)
		}
		if sh.maxRSSKiB > 0 && rss > sh.maxRSSKiB {
			t.Errorf("VmRSS %d KiB, want ≤ %d KiB", rss, sh.maxRSSKiB)
		}
	})
}

// cpuTicks is proctest.CPUTicks, failing the test when it cannot be read.
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	n, err := proctest.CPUTicks(pid)
	must(t, err)
	return n
}

func TestEmbeddedScriptsMatchFiles(t *testing.T) {
	for name, embedded := range map[string][]byte{"watchdog.sh": WatchdogSh, "watchdog.ps1": WatchdogPs1} {
		b, err := os.ReadFile(name)
		must(t, err)
		if len(embedded) == 0 || !bytes.Equal(b, embedded) {
			t.Errorf("%s: embedded copy (%d bytes) differs from the file (%d bytes)", name, len(embedded), len(b))
		}
		if n := bytes.Count(b, []byte("\n")); n > 250 {
			t.Errorf("%s: %d lines, want at most 250: decisions belong to the Go side", name, n)
		}
	}
	if !bytes.HasPrefix(WatchdogSh, []byte("#!/bin/sh\n")) {
		t.Errorf("watchdog.sh does not start with #!/bin/sh")
	}
	if bytes.ContainsRune(WatchdogSh, '\r') {
		t.Errorf("watchdog.sh has a carriage return: sh would take it for part of a word")
	}
	// Windows PowerShell 5.1 reads a script without a BOM in the ANSI code
	// page: only ASCII reads the same everywhere.
	for name, b := range map[string][]byte{"watchdog.sh": WatchdogSh, "watchdog.ps1": WatchdogPs1} {
		for i, c := range b {
			if c >= 0x80 {
				t.Errorf("%s: non-ASCII byte %#x at offset %d", name, c, i)
				break
			}
		}
	}
}
