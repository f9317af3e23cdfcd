package scripts

import (
	"bytes"
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
		for _, tool := range []string{"tr", "grep", "sed", "sort", "mv", "rm", "sleep", "touch", "timeout"} {
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
	must(h.t, os.WriteFile(h.ledgerFile(".json"), []byte(`{"pid":4242,"startedIso":"2026-11-29T20:30:38Z","backend":"docker"}`), 0o644))
	if sandboxes != nil {
		must(h.t, os.WriteFile(h.ledgerFile(".sandboxes"), sandboxes, 0o644))
	}
	if networks != nil {
		must(h.t, os.WriteFile(h.ledgerFile(".networks"), networks, 0o644))
	}
}

// step builds one STEP of the protocol.
func step(list, mode, gone, retry string, words ...string) []string {
	return append([]string{list, mode, gone, retry, strconv.Itoa(len(words))}, words...)
}

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

	full := append(append(slices.Clone(h.sh.argv[1:]), h.script), argv...)
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
		if rss, err := vmRSSKiB(pid); err == nil {
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

func vmRSSKiB(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, errors.New("no VmRSS")
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

// dockerSteps are the steps the Go side passes for docker, fake-rm standing in
// for /usr/bin/docker; rmVerb "rmf" behaves like docker rm -f (missing names
// do not fail the call), "rm" fails on them.
func (h *harness) dockerSteps(rmVerb string) [][]string {
	return [][]string{
		step("sandboxes", "batch", "No such container", "", h.fake, rmVerb),
		step("networks", "each", "No such network\nnot found", "", h.fake, "netrm"),
	}
}

func TestEverythingRemovedDeletesTheRun(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.writeRun([]byte("rz-ab12cd34-1\nrz-ab12cd34-2\nrz-missing-3\n"), []byte("rz-net-00000001\nrz-net-missing\n"))
		p := h.start(args(h.runs, runID, h.dockerSteps("rmf")...)...)
		// Whatever the owner writes is discarded, names included.
		_, err := p.w.Write([]byte("rz-net-injected\n$(touch " + filepath.Join(h.dir, "PWNED") + ")\nno newline"))
		must(t, err)
		p.assertWaiting(h.snapshot())
		p.finish()

		h.assertCalls(
			[]string{"rmf", "rz-ab12cd34-1", "rz-ab12cd34-2", "rz-missing-3"}, // one batch call
			[]string{"netrm", "rz-net-00000001"},
			[]string{"netrm", "rz-net-missing"}, // "not found": counts as removed
		)
		h.assertGone(".sandboxes", ".networks", ".json")
		h.assertNoTempFiles()
		if _, err := os.Stat(filepath.Join(h.dir, "PWNED")); err == nil {
			t.Errorf("%s: stdin content was executed", h.sh.name)
		}
	})
}

// A create the owner sent just before it died may be finished by the engine
// after the first pass found no such name: the second pass, a moment later,
// removes it, and decides what stays.
func TestSecondPassCatchesLateCreates(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.env = append(h.env, "RIGHTSIZE_WATCHDOG_SETTLE=0.2")
		h.writeRun([]byte("rz-late-1\nrz-ok-2\nrz-latestuck-3\n"), []byte("rz-net-late\n"))
		p := h.start(args(h.runs, runID, h.dockerSteps("rmf")...)...)
		p.assertWaiting(h.snapshot())
		p.finish()

		h.assertCalls(
			[]string{"rmf", "rz-late-1", "rz-latestuck-3", "rz-ok-2"},
			[]string{"netrm", "rz-net-late"},
			// The second pass, over the same names.
			[]string{"rmf", "rz-late-1", "rz-latestuck-3", "rz-ok-2"},
			[]string{"rmf", "rz-late-1"},
			[]string{"rmf", "rz-latestuck-3"},
			[]string{"rmf", "rz-ok-2"},
			[]string{"netrm", "rz-net-late"},
		)
		for _, n := range []string{"rz-late-1", "rz-net-late"} {
			if _, err := os.Stat(filepath.Join(h.state, "removed-"+n)); err != nil {
				t.Errorf("%s: %s, created after the first pass, was not removed by the second: %v", h.sh.name, n, err)
			}
		}
		// Not found at first, then a real failure: the second pass decides.
		h.assertContent(".sandboxes", "rz-latestuck-3\n")
		h.assertContent(".networks", "")
		h.assertContent(".json", `{"pid":4242,"startedIso":"2026-11-29T20:30:38Z","backend":"docker"}`)
	})
}

func TestFailedRemovalsKeepNamesAndRecord(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.writeRun([]byte("rz-a\nrz-missing\nrz-stuck\nrz-exit127\n"), []byte("rz-net-endpoints\nrz-net-ok\n"))
		p := h.start(args(h.runs, runID, h.dockerSteps("rm")...)...)
		p.assertWaiting(h.snapshot())
		p.finish()

		h.assertCalls(
			// The batch fails (missing, stuck), so each name is tried alone.
			[]string{"rm", "rz-a", "rz-exit127", "rz-missing", "rz-stuck"},
			[]string{"rm", "rz-a"},
			[]string{"rm", "rz-exit127"},
			[]string{"rm", "rz-missing"},
			[]string{"rm", "rz-stuck"},
			[]string{"netrm", "rz-net-endpoints"},
			[]string{"netrm", "rz-net-ok"},
		)
		// exit 127 says "No such container" too, but 127 is never "gone".
		h.assertContent(".sandboxes", "rz-exit127\nrz-stuck\n")
		h.assertContent(".networks", "rz-net-endpoints\n")
		h.assertContent(".json", `{"pid":4242,"startedIso":"2026-11-29T20:30:38Z","backend":"docker"}`)
		h.assertNoTempFiles()
	})
}

func TestMsbStepsRetryOnceAndLastStepDecides(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.writeRun([]byte("rz-a\nrz-flaky\nrz-alwaysflaky\nrz-missing\nrz-stopfails\n"), nil)
		steps := [][]string{
			step("sandboxes", "each", "not found", "error: database error:", h.fake, "stop"),
			step("sandboxes", "each", "not found", "error: database error:", h.fake, "rm"),
		}
		p := h.start(args(h.runs, runID, steps...)...)
		p.assertWaiting(h.snapshot())
		p.finish()

		var want [][]string
		for _, verb := range []string{"stop", "rm"} {
			want = append(want,
				[]string{verb, "rz-a"},
				[]string{verb, "rz-alwaysflaky"}, []string{verb, "rz-alwaysflaky"}, // retried once, no more
				[]string{verb, "rz-flaky"}, []string{verb, "rz-flaky"}, // fails once, retry succeeds
				[]string{verb, "rz-missing"}, // not found: no retry
				[]string{verb, "rz-stopfails"},
			)
		}
		h.assertCalls(want...)
		// rz-stopfails failed to stop but rm (the last step) removed it.
		h.assertContent(".sandboxes", "rz-alwaysflaky\n")
		h.assertContent(".json", `{"pid":4242,"startedIso":"2026-11-29T20:30:38Z","backend":"docker"}`)
		h.assertGone(".networks") // never existed, not created
	})
}

func TestBatchRetriedOnceBeforeGoingOneByOne(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.writeRun([]byte("rz-flaky\nrz-a\n"), []byte(""))
		p := h.start(args(h.runs, runID, step("sandboxes", "batch", "not found", "database error", h.fake, "rm"))...)
		p.assertWaiting(h.snapshot())
		p.finish()
		h.assertCalls(
			[]string{"rm", "rz-a", "rz-flaky"},
			[]string{"rm", "rz-a", "rz-flaky"},
		)
		h.assertGone(".sandboxes", ".networks", ".json")
	})
}

// hostileCorpus returns a line file full of payloads, and the valid names in it.
func hostileCorpus(dir string) (content []byte, valid []string, invalid int) {
	var b bytes.Buffer
	add := func(line string, ok bool) {
		b.WriteString(line)
		b.WriteByte('\n')
		if ok {
			valid = append(valid, strings.Trim(line, " \t\r\v\f"))
		} else if strings.Trim(line, " \t\r\v\f") != "" {
			invalid++
		}
	}
	pw := filepath.Join(dir, "PWNED")
	add("rz-ok1", true)
	add("  rz-ok2\t\r", true)
	add("\v\frz-ok3 \f", true)
	add("rz-ok4\r", true)
	add(strings.Repeat("z", 128), true)
	// Hex digits only: Docker would read them as the prefix of another
	// container's id and remove that one.
	add("34", false)
	add("e", false)
	add("DEADbeef0", false)
	add("", false)
	add(" \t ", false)
	add("$(touch "+pw+")", false)
	add("`touch "+pw+"2`", false)
	add("-f", false)
	add("--help", false)
	add("a;touch "+pw+"3", false)
	add("rz-x|touch "+pw+"4", false)
	add("rz-x&&touch "+pw+"5", false)
	add("$(touch PWNED6)", false)
	add("rz-x;\ntouch "+pw+"7", false) // two lines, both invalid
	invalid++
	add(`"rz-quoted"`, false)
	add("'rz-single'", false)
	add("rz-a\x00b", false)
	add("\x00rz-nul", false)
	add("rz-nul-end\x00", false)
	add(strings.Repeat("a", 10<<20), false)
	garbage := make([]byte, 10<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
		if garbage[i] == '\n' {
			garbage[i] = 0
		}
	}
	add(string(garbage), false)
	add(".hidden", false)
	add("_under", false)
	add("rz-\xc3\xa9", false)
	add("rz a", false)
	add("rz\ta", false)
	add("*", false)
	add("rz-a/../b", false)
	add("$HOME", false)
	add("${IFS}x", false)
	add("c"+strings.Repeat("d", 128), false) // 129 characters
	add("rz-ok5", true)
	b.WriteString("rz-ok6") // last line without a newline
	valid = append(valid, "rz-ok6")
	slices.Sort(valid)
	return b.Bytes(), valid, invalid
}

func TestHostileLineFilesRunNothing(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		corpus, valid, invalid := hostileCorpus(h.dir)
		networks := "rz-net-ok\n$(touch " + filepath.Join(h.dir, "PWNED8") + ")\n-rf\nrz-net-\x01\n"
		h.writeRun(corpus, []byte(networks))
		p := h.start(args(h.runs, runID, h.dockerSteps("rmf")...)...)
		p.assertWaiting(h.snapshot())
		stderr := p.finish()

		h.assertCalls(append([]string{"rmf"}, valid...), []string{"netrm", "rz-net-ok"})
		for _, c := range h.calls() {
			for _, a := range c[1:] {
				if !validName.MatchString(a) {
					t.Errorf("%s: invalid name %.60q reached the engine", h.sh.name, a)
				}
			}
		}
		for _, dir := range []string{h.dir, "/"} {
			for _, n := range []string{"PWNED", "PWNED2", "PWNED3", "PWNED4", "PWNED5", "PWNED6", "PWNED7", "PWNED8"} {
				if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
					t.Errorf("%s: %s exists: file content was executed", h.sh.name, filepath.Join(dir, n))
				}
			}
		}
		if want := fmt.Sprintf("skipped %d invalid line(s)", invalid); !strings.Contains(stderr, want) {
			t.Errorf("%s: stderr does not say %q", h.sh.name, want)
		}
		if !strings.Contains(stderr, "skipped 3 invalid line(s)") {
			t.Errorf("%s: stderr does not count the 3 invalid network lines", h.sh.name)
		}
		// Every valid name went, the invalid lines are dropped: nothing is left.
		h.assertGone(".sandboxes", ".networks", ".json")
	})
}

func TestSymlinkedLineFileIsNotFollowed(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		target := filepath.Join(h.dir, "elsewhere.txt")
		must(t, os.WriteFile(target, []byte("rz-victim\n"), 0o644))
		h.writeRun(nil, []byte("rz-net-1\n"))
		must(t, os.Symlink(target, h.ledgerFile(".sandboxes")))
		p := h.start(args(h.runs, runID, h.dockerSteps("rmf")...)...)
		p.assertWaiting(h.snapshot())
		stderr := p.finish()

		h.assertCalls([]string{"netrm", "rz-net-1"})
		if got, err := os.Readlink(h.ledgerFile(".sandboxes")); err != nil || got != target {
			t.Errorf("%s: symlink = %q, %v; want it left pointing at %s", h.sh.name, got, err, target)
		}
		if b, _ := os.ReadFile(target); string(b) != "rz-victim\n" {
			t.Errorf("%s: symlink target changed to %q", h.sh.name, b)
		}
		h.assertContent(".networks", "")
		h.assertContent(".json", `{"pid":4242,"startedIso":"2026-11-29T20:30:38Z","backend":"docker"}`)
		if !strings.Contains(stderr, "symbolic link") {
			t.Errorf("%s: stderr does not report the symlink", h.sh.name)
		}
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
		p.assertWaiting(h.snapshot())
		stderr := p.finish()

		h.assertCalls(
			[]string{"rm", "rz-a"},
			[]string{"rm", "rz-hangs-missing-2"}, // stopped; nothing after it
		)
		h.assertContent(".sandboxes", "rz-hangs-missing-2\n")
		h.assertContent(".networks", "rz-net-1\n")
		h.assertContent(".json", `{"pid":4242,"startedIso":"2026-11-29T20:30:38Z","backend":"docker"}`)
		for _, want := range []string{"no answer within 1s", "not tried, the engine did not answer"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: the log does not say %q:\n%s", h.sh.name, want, stderr)
			}
		}
		if strings.Contains(stderr, "second pass") {
			t.Errorf("%s: a second pass against an engine that does not answer:\n%s", h.sh.name, stderr)
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
					step("sandboxes", "batch", "No such container", "", prog, "rm", "-f"),
					step("networks", "each", "not found", "", prog, "network", "rm"),
				}
				p := h.start(args(h.runs, runID, steps...)...)
				p.assertWaiting(h.snapshot())
				p.finish()
				h.assertCalls()
				h.assertContent(".sandboxes", "rz-a\nrz-missing\n")
				h.assertContent(".networks", "rz-net-1\n")
				h.assertContent(".json", `{"pid":4242,"startedIso":"2026-11-29T20:30:38Z","backend":"docker"}`)
			})
		})
	}
}

func TestListWithoutStepIsKept(t *testing.T) {
	forEachShell(t, func(t *testing.T, h *harness) {
		h.writeRun([]byte("rz-a\n"), []byte("rz-net-1\n"))
		p := h.start(args(h.runs, runID, step("sandboxes", "batch", "No such container", "", h.fake, "rmf"))...)
		p.assertWaiting(h.snapshot())
		p.finish()
		h.assertCalls([]string{"rmf", "rz-a"})
		h.assertContent(".sandboxes", "")
		h.assertContent(".networks", "rz-net-1\n")
		h.assertContent(".json", `{"pid":4242,"startedIso":"2026-11-29T20:30:38Z","backend":"docker"}`)
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
			{"unknown LIST", args(h.runs, runID, step("volumes", "each", "", "", h.fake))},
			{"unknown MODE", args(h.runs, runID, step("sandboxes", "sometimes", "", "", h.fake))},
			{"N beyond the words", append(args(h.runs, runID), "sandboxes", "each", "", "", "3", h.fake, "rm")},
			{"N zero", append(args(h.runs, runID), "sandboxes", "each", "", "", "0")},
			{"N not a number", append(args(h.runs, runID), "sandboxes", "each", "", "", "x1", h.fake)},
			{"truncated step", append(args(h.runs, runID), "sandboxes", "each", "")},
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
		h.assertCalls()
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
