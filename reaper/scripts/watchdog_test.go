package scripts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/proctest"
)

// These tests run the embedded watchdog.sh for real, under every POSIX shell
// it promises to support, against testdata/fake-rm standing in for the
// engine's command line.

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

const runID = "ab12cd34"

type shell struct {
	name string
	argv []string // the interpreter and its flags; the script path follows
	// applets, when set, is a busybox binary: the script then sees a PATH of
	// busybox applets only, as on Alpine, so busybox's tr, grep and sed are
	// the ones tested.
	applets string
	// maxRSSKiB bounds VmRSS while waiting (0: logged, not asserted).
	maxRSSKiB int
}

var shells = []shell{
	{name: "dash", argv: []string{"/usr/bin/dash"}, maxRSSKiB: 2048},
	{name: "bash-posix", argv: []string{"/bin/bash", "--posix"}},
	{name: "busybox-ash", argv: []string{"/bin/busybox", "ash"}, applets: "/bin/busybox", maxRSSKiB: 2048},
}

// forEachShell runs fn once per shell, in parallel, each with its own harness.
func forEachShell(t *testing.T, fn func(t *testing.T, h *harness)) {
	t.Helper()
	for _, sh := range shells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := os.Stat(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed here (%v): watchdog.sh is not tested under %s", sh.argv[0], err, sh.name)
			}
			t.Parallel()
			fn(t, newHarness(t, sh))
		})
	}
}

type harness struct {
	t      *testing.T
	sh     shell
	dir    string // the test's root temp dir
	runs   string // the ledger's runs folder
	fake   string // fake-rm, in a folder whose name holds a space
	log    string // fake-rm's call log
	state  string // fake-rm's state folder
	script string // watchdog.sh as embedded
	env    []string
}

func newHarness(t *testing.T, sh shell) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{
		t:      t,
		sh:     sh,
		dir:    dir,
		runs:   filepath.Join(dir, "cache dir", "runs"),
		fake:   filepath.Join(dir, "engine bin", "fake-rm"),
		log:    filepath.Join(dir, "calls.log"),
		script: filepath.Join(dir, "reaper", "watchdog.sh"),
	}
	state := filepath.Join(dir, "fake-state")
	h.state = state
	for _, d := range []string{h.runs, filepath.Dir(h.fake), filepath.Dir(h.script), state} {
		must(t, os.MkdirAll(d, 0o755))
	}
	fake, err := os.ReadFile(filepath.Join("testdata", "fake-rm"))
	must(t, err)
	must(t, os.WriteFile(h.fake, fake, 0o755))
	must(t, os.WriteFile(h.script, WatchdogSh, 0o644))
	must(t, os.WriteFile(h.log, nil, 0o644))

	path := os.Getenv("PATH")
	if sh.applets != "" {
		bin := filepath.Join(dir, "applets")
		must(t, os.Mkdir(bin, 0o755))
		// touch too: a payload that did run would find it.
		for _, tool := range []string{"cat", "sed", "mv", "rm", "sleep", "touch", "timeout", "date", "ln"} {
			must(t, os.Symlink(sh.applets, filepath.Join(bin, tool)))
		}
		path = bin
	}
	// No second pass unless a test asks for one: every call is asserted.
	h.env = append(os.Environ(), "PATH="+path, "FAKE_RM_LOG="+h.log, "FAKE_RM_STATE="+state, "LANG=C.UTF-8", "RIGHTSIZE_WATCHDOG_SETTLE=0")
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ledgerFile is a run file's path, e.g. ledgerFile(".sandboxes").
func (h *harness) ledgerFile(suffix string) string {
	return filepath.Join(h.runs, runID+suffix)
}

// writeRun writes the record and the line files given (nil: no file).
func (h *harness) writeRun(sandboxes, networks []byte) {
	h.t.Helper()
	// Both records, as rightsize-go writes a run the family may judge:
	// the family's and its own.
	for _, ext := range []string{".json", ".gorecord"} {
		must(h.t, os.WriteFile(h.ledgerFile(ext), []byte(`{"pid":4242,"startedIso":"2026-11-29T20:30:38Z","backend":"docker"}`), 0o644))
	}
	if sandboxes != nil {
		must(h.t, os.WriteFile(h.ledgerFile(".sandboxes"), sandboxes, 0o644))
	}
	if networks != nil {
		must(h.t, os.WriteFile(h.ledgerFile(".networks"), networks, 0o644))
	}
}

// step builds one acting STEP of the protocol.
func step(kind, mode, gone, retry string, words ...string) []string {
	return append([]string{kind, "act", mode, gone, retry, strconv.Itoa(len(words))}, words...)
}

// finder builds one finding STEP.
func finder(kind string, words ...string) []string {
	return append([]string{kind, "find", "-", "", "", strconv.Itoa(len(words))}, words...)
}

// tell writes the owner's lines to the watchdog's stdin.
func (p *proc) tell(lines ...string) {
	p.h.t.Helper()
	for _, l := range lines {
		_, err := p.w.Write([]byte(l + "\n"))
		must(p.h.t, err)
	}
}

// found sets what the fake finder prints for kind: "ID|NAME|MARK" lines.
func (h *harness) found(kind string, lines ...string) {
	h.t.Helper()
	content := ""
	for _, l := range lines {
		content += l + "\n"
	}
	must(h.t, os.WriteFile(filepath.Join(h.state, "found-"+kind), []byte(content), 0o644))
}

const record = `{"pid":4242,"startedIso":"2026-11-29T20:30:38Z","backend":"docker"}`

func args(runsDir, id string, steps ...[]string) []string {
	out := []string{runsDir, id}
	for _, s := range steps {
		out = append(out, s...)
	}
	return out
}

// budget is how long one watchdog may take, kept inside go test's -timeout.
func budget(t *testing.T) time.Duration {
	d := 60 * time.Second
	if dl, ok := t.Deadline(); ok {
		if left := time.Until(dl) - 5*time.Second; left < d {
			d = left
		}
	}
	return d
}

type proc struct {
	h      *harness
	cmd    *exec.Cmd
	w      *os.File      // the owner's end of the stdin pipe
	done   chan struct{} // closed once the watchdog exited; err is then set
	err    error
	stderr string
}

// start spawns the watchdog with stdin the read end of a fresh pipe, the
// write end staying with the test (the owner).
func (h *harness) start(argv ...string) *proc {
	h.t.Helper()
	r, w, err := os.Pipe()
	must(h.t, err)
	stderr := filepath.Join(h.dir, fmt.Sprintf("stderr-%d.log", time.Now().UnixNano()))
	ef, err := os.Create(stderr)
	must(h.t, err)
	defer ef.Close()

	// As the product runs it: the text itself, never a file.
	full := append(append(slices.Clone(h.sh.argv[1:]), "-c", string(WatchdogSh), "rightsize-watchdog"), argv...)
	cmd := exec.Command(h.sh.argv[0], full...)
	cmd.Dir = h.dir
	cmd.Env = h.env
	cmd.Stdin = r
	cmd.Stderr = ef
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		h.t.Fatalf("start %s: %v", h.sh.name, err)
	}
	r.Close() // only the watchdog holds the read end now
	p := &proc{h: h, cmd: cmd, w: w, done: make(chan struct{}), stderr: stderr}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	h.t.Cleanup(func() {
		w.Close()
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the watchdog to exit and returns its exit code and stderr.
// The caller decides whether stdin is closed first.
func (p *proc) wait() (int, string) {
	p.h.t.Helper()
	limit := budget(p.h.t)
	select {
	case <-p.done:
	case <-time.After(limit):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.h.t.Fatalf("%s: watchdog still running after %v", p.h.sh.name, limit)
	}
	err := p.err
	stderr, _ := os.ReadFile(p.stderr)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(stderr)
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode(), string(stderr)
	default:
		p.h.t.Fatalf("%s: watchdog: %v\nstderr:\n%s", p.h.sh.name, err, stderr)
		return -1, ""
	}
}

// finish closes the owner's end of stdin (the owner "dies") and expects the
// watchdog to exit 0.
func (p *proc) finish() string {
	p.h.t.Helper()
	must(p.h.t, p.w.Close())
	code, stderr := p.wait()
	if code != 0 {
		p.h.t.Fatalf("%s: watchdog exited %d, want 0\nstderr:\n%s", p.h.sh.name, code, stderr)
	}
	p.h.t.Logf("%s stderr:\n%s", p.h.sh.name, stderr)
	return stderr
}

// snapshot reads every file in the runs folder (symlinks as their target
// name), to prove a waiting watchdog touched nothing.
func (h *harness) snapshot() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(h.runs)
	must(h.t, err)
	for _, e := range entries {
		p := filepath.Join(h.runs, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			must(h.t, err)
			out[e.Name()] = "-> " + target
			continue
		}
		b, err := os.ReadFile(p)
		must(h.t, err)
		out[e.Name()] = string(b)
	}
	return out
}

// assertWaiting proves the watchdog is blocked on its stdin with the owner's
// end open: not exited, blocked in a read (Linux), no child process, small,
// and the ledger and the engine untouched.
func (p *proc) assertWaiting(before map[string]string) {
	t := p.h.t
	t.Helper()
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.done:
			stderr, _ := os.ReadFile(p.stderr)
			t.Fatalf("%s: watchdog exited (%v) while its stdin was still open\nstderr:\n%s", p.h.sh.name, p.err, stderr)
		default:
		}
		blocked, known := blockedOnStdin(pid)
		if !known {
			// No /proc: all that can be shown is that it stays up a moment.
			if time.Now().After(deadline.Add(-9800 * time.Millisecond)) {
				break
			}
		} else if blocked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: watchdog never blocked reading stdin", p.h.sh.name)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if runtime.GOOS == "linux" {
		if kids := children(pid); len(kids) > 0 {
			t.Errorf("%s: a waiting watchdog has child processes %v", p.h.sh.name, kids)
		}
		if rss, err := proctest.VmRSSKiB(pid); err == nil {
			t.Logf("%s: waiting watchdog VmRSS %d KiB", p.h.sh.name, rss)
			if p.h.sh.maxRSSKiB > 0 && rss > p.h.sh.maxRSSKiB {
				t.Errorf("%s: waiting watchdog VmRSS %d KiB, want <= %d KiB", p.h.sh.name, rss, p.h.sh.maxRSSKiB)
			}
		}
	}
	if after := p.h.snapshot(); !mapsEqual(before, after) {
		t.Errorf("%s: ledger changed while the owner was alive:\nbefore %q\nafter  %q", p.h.sh.name, before, after)
	}
	if calls := p.h.calls(); len(calls) > 0 {
		t.Errorf("%s: engine called while the owner was alive: %q", p.h.sh.name, calls)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// blockedOnStdin reports whether pid sleeps in read(0, …) or a poll (busybox
// ash polls stdin before reading it); known is false without /proc.
func blockedOnStdin(pid int) (blocked, known bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		return false, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 || f[0] == "running" {
		return false, true
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil {
		return false, true
	}
	var read, polls []int
	switch runtime.GOARCH {
	case "amd64":
		read, polls = []int{0}, []int{7, 23, 270, 271} // read; poll, select, pselect6, ppoll
	case "arm64":
		read, polls = []int{63}, []int{72, 73} // read; pselect6, ppoll
	default:
		return nr >= 0, true
	}
	return (slices.Contains(read, nr) && f[1] == "0x0") || slices.Contains(polls, nr), true
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid …
		if len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// calls parses fake-rm's log: per call, the argument count then the
// arguments, every field NUL-terminated. The program path is not recorded.
func (h *harness) calls() [][]string {
	h.t.Helper()
	b, err := os.ReadFile(h.log)
	must(h.t, err)
	if len(b) == 0 {
		return nil
	}
	fields := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	var out [][]string
	for len(fields) > 0 {
		n, err := strconv.Atoi(fields[0])
		if err != nil || n > len(fields)-1 {
			h.t.Fatalf("corrupt fake-rm log %q", b)
		}
		out = append(out, fields[1:1+n])
		fields = fields[1+n:]
	}
	return out
}

func (h *harness) assertCalls(want ...[]string) {
	h.t.Helper()
	got := h.calls()
	if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		h.t.Errorf("%s: engine calls\n got  %q\n want %q", h.sh.name, got, want)
	}
}

func (h *harness) assertGone(suffixes ...string) {
	h.t.Helper()
	for _, s := range suffixes {
		if _, err := os.Lstat(h.ledgerFile(s)); !errors.Is(err, os.ErrNotExist) {
			h.t.Errorf("%s: %s still there (%v), want it deleted", h.sh.name, runID+s, err)
		}
	}
}

func (h *harness) assertContent(suffix, want string) {
	h.t.Helper()
	got, err := os.ReadFile(h.ledgerFile(suffix))
	if err != nil {
		h.t.Errorf("%s: %s: %v, want it kept with %q", h.sh.name, runID+suffix, err, want)
		return
	}
	if string(got) != want {
		h.t.Errorf("%s: %s = %q, want %q", h.sh.name, runID+suffix, got, want)
	}
}

func (h *harness) assertNoTempFiles() {
	h.t.Helper()
	entries, err := os.ReadDir(h.runs)
	must(h.t, err)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			h.t.Errorf("%s: temporary file %s left behind", h.sh.name, e.Name())
		}
	}
}

// dockerSteps are the steps the Go side passes for docker, fake-rm standing
// in for /usr/bin/docker: a finder and a removal per kind. rmVerb "rmf"
// behaves like docker rm -f (missing ids do not fail the call), "rm" fails
// on them.
func (h *harness) dockerSteps(rmVerb string) [][]string {
	gone := "No such container\nno such container\nNo such network\nnetwork not found"
	return [][]string{
		finder("sandboxes", h.fake, "find", "sandboxes"),
		step("sandboxes", "batch", gone, "", h.fake, rmVerb),
		finder("networks", h.fake, "find", "networks"),
		step("networks", "batch", gone, "", h.fake, "netrm"),
	}
}

// msbSteps are msb's: no finder, stop then rm, one name at a time.
func (h *harness) msbSteps() [][]string {
	return [][]string{
		step("sandboxes", "each", "not found", "error: database error:", h.fake, "stop"),
		step("sandboxes", "each", "not found", "error: database error:", h.fake, "rm"),
	}
}

// The owner tells the ids it created; at its death they go in one call,
// before anything else is run; then the finders confirm nothing carries
// the run's label any more, and the run's files go.
func TestToldIDsRemovedAtOnceThenLabelsConfirm(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.writeRun([]byte("rz-ab12cd34-1\nrz-ab12cd34-2\n"), []byte("rz-net-00000001\n"))
		p := h.start(args(h.runs, runID, h.dockerSteps("rmf")...)...)
		pw := filepath.Join(h.dir, "PWNED")
		p.tell(
			"+s 1111aaaa1111 rz-ab12cd34-1",
			"+s 2222bbbb2222 rz-ab12cd34-2",
			"+s 3333cccc3333 rz-ab12cd34-3", "-s 3333cccc3333 rz-ab12cd34-3", // removed by the owner itself
			"+n 4444dddd4444 rz-net-00000001",
			"$(touch "+pw+")", "+s $(touch "+pw+") x", "+s -rf -rf", "+s a;b c", "+x 5555 rz-y", "garbage with no newline")
		p.assertWaiting(h.snapshot())
		p.finish()

		h.assertCalls(
			[]string{"rmf", "1111aaaa1111", "2222bbbb2222"}, // one call, at once
			[]string{"netrm", "4444dddd4444"},
			[]string{"find", "sandboxes"},
			[]string{"find", "networks"},
		)
		h.assertGone(".sandboxes", ".networks", ".json", ".gorecord")
		h.assertNoTempFiles()
		if _, err := os.Stat(pw); err == nil {
			t.Errorf("%s: stdin content was executed", h.sh.name)
		}
	})
}

// A create the owner sent just before it died is finished by the engine
// after the first pass: the owner never learnt its id, but it carries the
// run's label, and the second pass finds and removes it.
func TestSecondPassFindsLateCreates(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.env = append(h.env, "RIGHTSIZE_WATCHDOG_SETTLE=0.2")
		h.writeRun([]byte("rz-ab12cd34-1\nrz-ab12cd34-2\n"), []byte("rz-net-00000002\n"))
		h.found("sandboxes", "9999eeee9999|/rz-ab12cd34-2|")
		h.found("networks", "8888ffff8888|rz-net-00000002|")
		p := h.start(args(h.runs, runID, h.dockerSteps("rmf")...)...)
		p.tell("+s 1111aaaa1111 rz-ab12cd34-1")
		p.assertWaiting(h.snapshot())
		stderr := p.finish()

		h.assertCalls(
			[]string{"rmf", "1111aaaa1111"},
			[]string{"find", "sandboxes"},
			[]string{"rmf", "9999eeee9999"},
			[]string{"find", "networks"},
			[]string{"netrm", "8888ffff8888"},
		)
		h.assertGone(".sandboxes", ".networks", ".json", ".gorecord")
		if !strings.Contains(stderr, "second pass in 0.2s") {
			t.Errorf("%s: no second pass announced:\n%s", h.sh.name, stderr)
		}
	})
}

// What a finder prints is data: a keep-alive sandbox (its mark, or its
// name) is never acted on, and a line that is not an id and a name is
// skipped, never run.
func TestFinderOutputIsCheckedNeverRun(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.writeRun([]byte("rz-ab12cd34-3\n"), nil)
		pw := filepath.Join(h.dir, "PWNED")
		h.found("sandboxes",
			"aaaa00000001|rz-reuse-799aad5a3338|799aad5a3338", // keep-alive, by its label
			"aaaa00000002|rz-reuse-0123456789ab|",             // keep-alive, by its name
			"aaaa00000003|rz-ab12cd34-3|",                     // the run's
			"$(touch "+pw+")|x|", "aaaa0004;touch "+pw+"|y|", "-rf|z|", "`id`|w|", "|rz-empty|",
			strings.Repeat("a", 200)+"|n|")
		p := h.start(args(h.runs, runID, h.dockerSteps("rmf")...)...)
		p.assertWaiting(h.snapshot())
		p.finish()
		h.assertCalls([]string{"find", "sandboxes"}, []string{"rmf", "aaaa00000003"}, []string{"find", "networks"})
		for _, c := range h.calls() {
			for _, a := range c[1:] {
				if !validName.MatchString(a) {
					t.Errorf("%s: %.60q reached the engine", h.sh.name, a)
				}
			}
		}
		if _, err := os.Stat(pw); err == nil {
			t.Errorf("%s: finder output was executed", h.sh.name)
		}
		h.assertGone(".sandboxes", ".json", ".gorecord")
	})
}

// A labelled kind that cannot be confirmed clean keeps the run's files as
// they are, a superset of what may live, for the next sweep.
func TestUnconfirmedRemovalKeepsTheRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *harness)
		calls [][]string
	}{
		{"removal fails", func(h *harness) { h.found("sandboxes", "5555stuck555|rz-ab12cd34-1|") }, [][]string{
			{"rm", "5555stuck555"}, {"find", "sandboxes"}, {"rm", "5555stuck555"}, {"rm", "5555stuck555"}, {"find", "networks"},
		}},
		// What the first pass could not remove is tried again, found or not.
		{"finder fails", func(h *harness) { must(h.t, os.WriteFile(filepath.Join(h.state, "find-rc"), []byte("1"), 0o644)) }, [][]string{
			{"rm", "5555stuck555"}, {"find", "sandboxes"}, {"rm", "5555stuck555"}, {"rm", "5555stuck555"}, {"find", "networks"},
		}},
		{"network in use", func(h *harness) { h.found("networks", "6666endpoints|rz-net-00000003|") }, [][]string{
			{"rm", "5555stuck555"}, {"find", "sandboxes"}, {"rm", "5555stuck555"}, {"rm", "5555stuck555"},
			{"find", "networks"}, {"netrm", "6666endpoints"}, {"netrm", "6666endpoints"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachShell(t, func(t *testing.T, h *harness) {
				h.writeRun([]byte("rz-ab12cd34-1\nnot even a name\n"), []byte("rz-net-00000003\n"))
				tc.setup(h)
				p := h.start(args(h.runs, runID, h.dockerSteps("rm")...)...)
				p.tell("+s 5555stuck555 rz-ab12cd34-1")
				before := h.snapshot()
				p.assertWaiting(before)
				p.finish()
				h.assertCalls(tc.calls...)
				if after := h.snapshot(); !mapsEqual(before, after) {
					t.Errorf("%s: the run's files changed:\nbefore %q\nafter  %q", h.sh.name, before, after)
				}
			})
		})
	}
}

// msb keeps no labels: the names the owner told before each create are
// what the watchdog removes, each step retried once on msb's database
// error, the last step deciding what stays listed.
func TestMsbStepsRetryOnceAndLastStepDecides(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		names := []string{"rz-a", "rz-flaky", "rz-alwaysflaky", "rz-missing", "rz-stopfails"}
		h.writeRun([]byte(strings.Join(names, "\n")+"\n"), nil)
		p := h.start(args(h.runs, runID, h.msbSteps()...)...)
		for _, n := range names {
			p.tell("+s " + n + " " + n)
		}
		p.assertWaiting(h.snapshot())
		p.finish()

		var want [][]string
		for _, verb := range []string{"stop", "rm"} {
			want = append(want,
				[]string{verb, "rz-a"},
				[]string{verb, "rz-flaky"}, []string{verb, "rz-flaky"}, // fails once, retry succeeds
				[]string{verb, "rz-alwaysflaky"}, []string{verb, "rz-alwaysflaky"}, // retried once, no more
				[]string{verb, "rz-missing"}, // not found: no retry
				[]string{verb, "rz-stopfails"},
			)
		}
		h.assertCalls(want...)
		// rz-stopfails failed to stop but rm (the last step) removed it.
		h.assertContent(".sandboxes", "rz-alwaysflaky\n")
		h.assertContent(".json", record)
		h.assertContent(".gorecord", record)
		h.assertGone(".networks") // never existed, not created
		h.assertNoTempFiles()
	})
}

func TestBatchRetriedOnceBeforeGoingOneByOne(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.writeRun([]byte("rz-flaky\nrz-a\n"), []byte(""))
		p := h.start(args(h.runs, runID, step("sandboxes", "batch", "not found", "database error", h.fake, "rm"))...)
		p.tell("+s rz-flaky rz-flaky", "+s rz-a rz-a")
		p.assertWaiting(h.snapshot())
		p.finish()
		h.assertCalls(
			[]string{"rm", "rz-flaky", "rz-a"},
			[]string{"rm", "rz-flaky", "rz-a"},
		)
		h.assertGone(".sandboxes", ".networks", ".json", ".gorecord")
	})
}

// The watchdog never reads a line file: whatever a hostile one holds, it
// is never parsed, never run, never handed to the engine.
func TestHostileLineFilesAreNeverRead(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		pw := filepath.Join(h.dir, "PWNED")
		garbage := make([]byte, 4<<20)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range garbage {
			garbage[i] = byte(rng.UintN(256))
		}
		h.writeRun(append([]byte("$(touch "+pw+")\n`touch "+pw+"`\n-rf\n34\npostgres-dev\n"), garbage...), []byte("rz-net-x;touch "+pw+"\n"))
		p := h.start(args(h.runs, runID, h.dockerSteps("rmf")...)...)
		p.assertWaiting(h.snapshot())
		p.finish()
		h.assertCalls([]string{"find", "sandboxes"}, []string{"find", "networks"})
		if _, err := os.Stat(pw); err == nil {
			t.Errorf("%s: file content was executed", h.sh.name)
		}
		h.assertGone(".sandboxes", ".networks", ".json", ".gorecord")
	})
}

// A line file that is a symbolic link is removed as a link: its target is
// never read, written or deleted.
func TestSymlinkedLineFileIsNotFollowed(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		target := filepath.Join(h.dir, "elsewhere.txt")
		must(t, os.WriteFile(target, []byte("rz-victim\n"), 0o644))
		h.writeRun(nil, []byte("rz-net-1\n"))
		must(t, os.Symlink(target, h.ledgerFile(".sandboxes")))
		p := h.start(args(h.runs, runID, h.msbSteps()...)...)
		p.tell("+s rz-stuck rz-stuck")
		p.assertWaiting(h.snapshot())
		p.finish()
		if got, err := os.Readlink(h.ledgerFile(".sandboxes")); err != nil || got != target {
			t.Errorf("%s: symlink = %q, %v; want it left pointing at %s", h.sh.name, got, err, target)
		}
		if b, _ := os.ReadFile(target); string(b) != "rz-victim\n" {
			t.Errorf("%s: symlink target changed to %q", h.sh.name, b)
		}
		h.assertContent(".json", record)
		h.assertContent(".gorecord", record)
	})
}

// An engine that takes the connection and never answers: a call is stopped
// after RIGHTSIZE_WATCHDOG_CALL_TIMEOUT seconds and fails, whatever it
// printed; every later call is skipped rather than waiting out the bound in
// turn, so the watchdog ends (within the test's budget, far less than the
// 300 s the call would take) and every name stays for the next sweep.
// Under busybox ash the script finds busybox's own timeout, which stops a
// call with SIGTERM instead of exiting 124.
func TestHungCallIsBounded(t *testing.T) {
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skipf("no timeout command here (%v): the watchdog's calls are unbounded, as documented", err)
	}
	forEachShell(t, func(t *testing.T, h *harness) {
		h.env = append(h.env, "RIGHTSIZE_WATCHDOG_CALL_TIMEOUT=1", "RIGHTSIZE_WATCHDOG_SETTLE=0.2")
		// "missing" in the hung call's name: its output would say "No such
		// container" if it ever printed, which must not count as gone.
		h.writeRun([]byte("rz-a\nrz-hangs-missing-2\n"), []byte("rz-net-1\n"))
		steps := [][]string{
			step("sandboxes", "each", "No such container", "", h.fake, "rm"),
			step("networks", "each", "not found", "", h.fake, "netrm"),
		}
		p := h.start(args(h.runs, runID, steps...)...)
		p.tell("+s rz-a rz-a", "+s rz-hangs-missing-2 rz-hangs-missing-2", "+n rz-net-1 rz-net-1")
		before := h.snapshot()
		p.assertWaiting(before)
		stderr := p.finish()

		h.assertCalls(
			[]string{"rm", "rz-a"},
			[]string{"rm", "rz-hangs-missing-2"}, // stopped; nothing after it
		)
		if after := h.snapshot(); !mapsEqual(before, after) {
			t.Errorf("%s: files changed after a hung call: %q", h.sh.name, after)
		}
		for _, want := range []string{"no answer within 1s", "not tried, the engine did not answer"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: the log does not say %q:\n%s", h.sh.name, want, stderr)
			}
		}
		if strings.Contains(stderr, "second pass in") {
			t.Errorf("%s: waited for a second pass against an engine that does not answer:\n%s", h.sh.name, stderr)
		}
	})
}

func TestUnrunnableProgramKeepsEverything(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string
		prog   func(h *harness) string
	}{
		{"missing", "no such file", func(h *harness) string { return filepath.Join(h.dir, "no such dir", "docker") }},
		{"not-executable", "a file without the x bit", func(h *harness) string {
			p := filepath.Join(h.dir, "engine bin", "fake-rm-noexec")
			b, err := os.ReadFile(h.fake)
			must(h.t, err)
			must(h.t, os.WriteFile(p, b, 0o644))
			return p
		}},
		{"directory", "a directory is executable but no program", func(h *harness) string { return filepath.Dir(h.fake) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachShell(t, func(t *testing.T, h *harness) {
				h.writeRun([]byte("rz-a\nrz-missing\n"), []byte("rz-net-1\n"))
				prog := tc.prog(h)
				steps := [][]string{
					finder("sandboxes", prog, "find", "sandboxes"),
					step("sandboxes", "batch", "No such container", "", prog, "rm", "-f"),
					step("networks", "each", "not found", "", prog, "network", "rm"),
				}
				p := h.start(args(h.runs, runID, steps...)...)
				p.tell("+s 1111aaaa1111 rz-a", "+n rz-net-1 rz-net-1")
				before := h.snapshot()
				p.assertWaiting(before)
				p.finish()
				h.assertCalls()
				if after := h.snapshot(); !mapsEqual(before, after) {
					t.Errorf("%s: files changed: %q", h.sh.name, after)
				}
			})
		})
	}
}

func TestKindWithoutStepIsKept(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.writeRun([]byte("rz-a\n"), []byte("rz-net-1\n"))
		p := h.start(args(h.runs, runID, step("sandboxes", "batch", "No such container", "", h.fake, "rmf"))...)
		p.tell("+s rz-a rz-a", "+n rz-net-1 rz-net-1")
		p.assertWaiting(h.snapshot())
		p.finish()
		h.assertCalls([]string{"rmf", "rz-a"})
		h.assertContent(".networks", "rz-net-1\n")
		h.assertContent(".json", record)
		h.assertContent(".gorecord", record)
	})
}

func TestBadArgumentsRefusedBeforeWaiting(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.writeRun([]byte("rz-a\n"), nil)
		before := h.snapshot()
		ok := step("sandboxes", "each", "", "", h.fake, "rm")
		for _, tc := range []struct {
			reason string
			argv   []string
		}{
			{"empty RUN_ID", args(h.runs, "", ok)},
			{"RUN_ID with a slash", args(h.runs, "../"+filepath.Base(h.runs)+"/"+runID, ok)},
			{"RUN_ID with a slash inside", args(h.runs, "a/b", ok)},
			{"RUN_ID starting with a dot", args(h.runs, "."+runID, ok)},
			{"RUN_ID starting with a dash", args(h.runs, "-"+runID, ok)},
			{"RUN_ID only", []string{h.runs}},
			{"relative RUNS_DIR", args("cache dir/runs", runID, ok)},
			{"unknown KIND", args(h.runs, runID, step("volumes", "each", "", "", h.fake))},
			{"unknown ROLE", append(args(h.runs, runID), "sandboxes", "poke", "each", "", "", "1", h.fake)},
			{"unknown MODE", args(h.runs, runID, step("sandboxes", "sometimes", "", "", h.fake))},
			{"N beyond the words", append(args(h.runs, runID), "sandboxes", "act", "each", "", "", "3", h.fake, "rm")},
			{"N zero", append(args(h.runs, runID), "sandboxes", "act", "each", "", "", "0")},
			{"N not a number", append(args(h.runs, runID), "sandboxes", "act", "each", "", "", "x1", h.fake)},
			{"truncated step", append(args(h.runs, runID), "sandboxes", "act", "each", "")},
			{"relative program", args(h.runs, runID, step("sandboxes", "each", "", "", "fake-rm", "rm"))},
		} {
			p := h.start(tc.argv...)
			// Stdin stays open: a refusal must not wait for the owner.
			code, stderr := p.wait()
			if code != 2 || strings.TrimSpace(stderr) == "" {
				t.Errorf("%s: %s: exit %d, stderr %q; want exit 2 with a message", h.sh.name, tc.reason, code, stderr)
			}
		}
		if after := h.snapshot(); !mapsEqual(before, after) {
			t.Errorf("%s: ledger changed: %q", h.sh.name, after)
		}
		h.assertCalls()
	})
}

func TestNoLedgerFilesExitsZero(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		p := h.start(args(h.runs, runID, h.dockerSteps("rmf")...)...)
		p.assertWaiting(h.snapshot())
		p.finish()
		h.assertCalls([]string{"find", "sandboxes"}, []string{"find", "networks"})
		if after := h.snapshot(); len(after) != 0 {
			t.Errorf("%s: files appeared: %q", h.sh.name, after)
		}
	})
}

func TestEmbeddedScriptsMatchFiles(t *testing.T) {
	for name, embedded := range map[string][]byte{"watchdog.sh": WatchdogSh, "watchdog.ps1": WatchdogPs1} {
		b, err := os.ReadFile(name)
		must(t, err)
		if len(embedded) == 0 || !bytes.Equal(b, embedded) {
			t.Errorf("%s: embedded copy (%d bytes) differs from the file (%d bytes)", name, len(embedded), len(b))
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

// fates makes the run's fates folder, where the watchdog writes its fate,
// and returns it.
func (h *harness) fates() string {
	h.t.Helper()
	dir := filepath.Join(filepath.Dir(h.runs), "fates")
	must(h.t, os.MkdirAll(dir, 0o700))
	return dir
}

// readFates reads the fates folder: file name to content.
func readFates(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		must(t, err)
		out[e.Name()] = string(b)
	}
	return out
}

// The watchdog's fate never replaces another fate of the run written in
// the same second (a sweep's, say): it takes the next free millisecond.
func TestFateNeverReplacesAnother(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		dir := h.fates()
		h.writeRun([]byte("rz-ab12cd34-1\n"), nil)
		// Every name the watchdog could pick for the next minute is taken
		// by a fate of another writer, in its first millisecond.
		now := time.Now().Unix()
		for s := now - 2; s < now+60; s++ {
			must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d000.json", runID, s)), []byte(fmt.Sprintf(`{"version":1,"by":"sweep %d"}`, s)), 0o600))
		}
		before := readFates(t, dir)
		p := h.start(args(h.runs, runID, h.dockerSteps("rm")...)...)
		p.tell("+s 1111aaaa1111 rz-ab12cd34-1")
		p.finish()
		after := readFates(t, dir)
		for name, content := range before {
			if after[name] != content {
				t.Errorf("%s: fate %s was replaced: %q", h.sh.name, name, after[name])
			}
		}
		var added []string
		for name, content := range after {
			if _, ok := before[name]; !ok {
				added = append(added, name)
				if !regexp.MustCompile(`^`+runID+`-\d+001\.json$`).MatchString(name) || !strings.Contains(content, `"by":"watchdog"`) {
					t.Errorf("%s: new fate %s: %q; want the watchdog's, in the next millisecond", h.sh.name, name, content)
				}
			}
		}
		if len(added) != 1 {
			t.Errorf("%s: fates added %q, want one", h.sh.name, added)
		}
		h.assertNoTempFiles()
	})
}

// A sandbox the watchdog could not remove is kept in its fate with the
// reason, not with none.
func TestFateSaysWhyItKept(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		dir := h.fates()
		h.writeRun([]byte("rz-ab12cd34-1\n"), nil)
		p := h.start(args(h.runs, runID, h.dockerSteps("rm")...)...)
		p.tell("+s 5555stuck555 rz-ab12cd34-1")
		p.finish()
		fates := readFates(t, dir)
		if len(fates) != 1 {
			t.Fatalf("%s: fates %q, want one", h.sh.name, fates)
		}
		for name, content := range fates {
			want := `{"kind":"sandbox","id":"5555stuck555","name":"rz-ab12cd34-1","outcome":"kept","note":"its removal failed (the engine may be down; RIGHTSIZE_REAPER_DEBUG=1 keeps the log of why)"}`
			if !strings.Contains(content, want) || !json.Valid([]byte(content)) {
				t.Errorf("%s: fate %s: %s\nwant valid JSON with an item %s", h.sh.name, name, content, want)
			}
		}
	})
}
