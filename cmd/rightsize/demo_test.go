package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/ledger"
)

var built struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// binary builds cmd/rightsize once for the demo tests: they run the real
// program, as `make demo` does, not this test binary.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "rightsize-cli-test-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "rightsize")
		if runtime.GOOS == "windows" {
			built.path += ".exe"
		}
		// `go test` puts its own go first on the PATH of the tests it runs.
		cmd := exec.Command("go", "build", "-o", built.path, ".")
		built.out, built.err = cmd.CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.path
}

// demoSetup skips without an engine, and returns the program and an
// environment with a temporary folder and a cache dir of the test's own.
func demoSetup(t *testing.T) (bin string, env []string, tmp string, api *client.Client) {
	t.Helper()
	if skip, _ := strconv.ParseBool(os.Getenv(testimage.EnvSkip)); skip {
		t.Skip(testimage.EnvSkip + " is set")
	}
	testimage.Busybox(t) // fails with `make engine` advice when the engine or busybox is missing
	api = dockerAPI(t)
	bin = binary(t)
	tmp = t.TempDir()
	cache := filepath.Join(t.TempDir(), "user-cache")
	env = append(os.Environ(),
		"TMPDIR="+tmp,
		"RIGHTSIZE_CACHE_DIR="+cache,
		"TESTCONTAINERS_RYUK_DISABLED=true",
		"NO_COLOR=1",
	)
	t.Cleanup(func() {
		if _, err := os.Stat(cache); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the demo touched RIGHTSIZE_CACHE_DIR (%s): %v; it must use a cache dir of its own", cache, err)
		}
	})
	return bin, env, tmp, api
}

var (
	reDemoID  = regexp.MustCompile(`(?m)^  label +` + regexp.QuoteMeta(demoLabel) + `=([0-9a-f]{8}) `)
	reCache   = regexp.MustCompile(`(?m)^  ledger +(\S+) \(a cache dir of its own`)
	reRun     = regexp.MustCompile(`(?m)^   pid (\d+), run ([0-9a-f]{8}), (?:watchdog pid (\d+)|no watchdog): ready in \d+ ms$`)
	reWatched = regexp.MustCompile(`(?m)^   last container gone (\d+) ms after the kill, the network (\d+) ms after$`)
)

func TestDemo(t *testing.T) {
	bin, env, tmp, api := demoSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo")
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	out := stdout.String()
	t.Logf("rightsize demo, %s:\n%s", took.Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("rightsize demo: %v\nstderr: %s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr is not empty: %q", stderr.String())
	}

	id := submatch(t, reDemoID, out, 1)
	cache := submatch(t, reCache, out, 1)
	runs := reRun.FindAllStringSubmatch(out, -1)
	if len(runs) != 2 {
		t.Fatalf("want two test processes (pid, run, ready) in the output, got %d", len(runs))
	}
	run1, run2 := runs[0][2], runs[1][2]
	if runs[0][3] == "" || runs[1][3] != "" {
		t.Errorf("the first test process must have a watchdog and the second none: %q, %q", runs[0][0], runs[1][0])
	}
	// The key lines, in order.
	want := []string{
		`(?m)^rightsize demo: whatever kills a test process, its sandboxes go away$`,
		`(?m)^  image +rightsize-demo/busybox:[0-9a-f]{12} \(FROM scratch`,
		`(?m)^1\. A test process starts two guarded containers and a network \(watchdog on\)$`,
		`(?m)^   ENGINE ID +KIND +NAME +IMAGE +STATUS$`,
		`(?m)^   [0-9a-f]{12} +sandbox +rz-` + run1 + `-[12] +rightsize-demo/busybox:[0-9a-f]{12} +running, created \d+\.\d s ago$`,
		`(?m)^   [0-9a-f]{12} +network +rz-net-` + run1 + `$`,
		`(?m)^2\. SIGKILL the test process \(pid ` + runs[0][1] + `\): none of its own cleanup can run$`,
		`(?m)^3\. Its watchdog sees its pipe close, and removes everything$`,
		reWatched.String(),
		`(?m)^   the engine lists nothing of run ` + run1 + `$`,
		`(?m)^   and its ledger files are deleted$`,
		`(?m)^4\. Again with the watchdog off \(RIGHTSIZE_REAPER=sweep in the test process's environment\)$`,
		`(?m)^5\. SIGKILL it \(pid ` + runs[1][1] + `\): this time nothing is watching$`,
		`(?m)^   1\.0 s later the leftovers are still there:$`,
		`(?m)^   [0-9a-f]{12} +sandbox +rz-` + run2 + `-[12] +rightsize-demo/busybox:[0-9a-f]{12} +running, created \d+\.\d s ago$`,
		`(?m)^   [0-9a-f]{12} +network +rz-net-` + run2 + `$`,
		`(?m)^   the ledger lists run ` + run2 + `: owner dead \(no process has pid ` + runs[1][1] + `\), 2 sandboxes, 1 network$`,
		`(?m)^6\. The next process's sweep removes them`,
		`(?m)^     ` + run2 + `  reaped  dead: no process has pid ` + runs[1][1] + `$`,
		`(?m)^         - sandbox rz-` + run2 + `-1: removed$`,
		`(?m)^   leftovers removed by the sweep in \d+ ms$`,
		`(?m)^   the engine lists nothing of run ` + run2 + `$`,
		`(?m)^Everything is gone: the engine lists nothing of runs ` + run1 + ` and ` + run2 + `, and the demo's cache dir is removed \(\d+\.\d s in all\)\.$`,
	}
	rest := out
	for _, w := range want {
		loc := regexp.MustCompile(w).FindStringIndex(rest)
		if loc == nil {
			t.Fatalf("no line matching %s (after the lines matched before it)", w)
		}
		rest = rest[loc[1]:]
	}
	if strings.Contains(out, "\x1b") {
		t.Error("escape sequences in the output of a demo that does not write to a terminal")
	}
	if ms, _ := strconv.Atoi(submatch(t, reWatched, out, 1)); ms > 10000 {
		t.Errorf("the watchdog took %d ms to remove the containers; want about a second at most", ms)
	}
	checkNothingLeft(t, api, id, cache, tmp, run1, run2)
}

// TestDemoInterrupted interrupts the demo with SIGINT, as Ctrl-C does, at
// two moments: while its first test process is starting sandboxes (the
// watchdog will see it die too), and once the second one is killed with
// its leftovers still there and no watchdog. Either way the demo exits
// 130 and leaves nothing behind.
func TestDemoInterrupted(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send on Windows")
	}
	for _, c := range []struct {
		name, at string
	}{
		{"while starting", `^1\. `},
		{"with leftovers and no watchdog", `^5\. `},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin, env, tmp, api := demoSetup(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "demo")
			cmd.Env = env
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			pipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			at := regexp.MustCompile(c.at)
			var out strings.Builder
			sent := false
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				out.WriteString(sc.Text() + "\n")
				if !sent && at.MatchString(sc.Text()) {
					if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
						t.Fatal(err)
					}
					sent = true
				}
			}
			err = cmd.Wait()
			t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), stderr.String())
			if !sent {
				t.Fatalf("the demo never printed a line matching %s", c.at)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
				t.Fatalf("rightsize demo interrupted: %v; want exit code %d", err, exitInterrupted)
			}
			if !regexp.MustCompile(`^rightsize: demo interrupted: .*; nothing is left\n$`).MatchString(stderr.String()) {
				t.Errorf("stderr %q; want one line saying the demo was interrupted and nothing is left", stderr.String())
			}
			id := submatch(t, reDemoID, out.String(), 1)
			cache := submatch(t, reCache, out.String(), 1)
			var runIDs []string
			for _, m := range reRun.FindAllStringSubmatch(out.String(), -1) {
				runIDs = append(runIDs, m[2])
			}
			checkNothingLeft(t, api, id, cache, tmp, runIDs...)
		})
	}
}

// TestDemoOutputClosed closes the demo's stdout under it, as `rightsize
// demo | head` does: while its first test process runs (its watchdog on),
// and once the second one is killed with its leftovers there. The demo
// must notice, stop, clean up through the watchdog and the sweep, and say
// so in one line with exit code 1.
func TestDemoOutputClosed(t *testing.T) {
	for _, c := range []struct {
		name, at string
	}{
		{"with a test process running", `^   pid \d+, run [0-9a-f]{8}, watchdog pid \d+: ready`},
		{"with leftovers and no watchdog", `^5\. `},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin, env, tmp, api := demoSetup(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "demo")
			cmd.Env = env
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			pipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			at := regexp.MustCompile(c.at)
			var out strings.Builder
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				out.WriteString(sc.Text() + "\n")
				if at.MatchString(sc.Text()) {
					break
				}
			}
			pipe.Close()
			err = cmd.Wait()
			t.Logf("stdout until it was closed:\n%s\nstderr:\n%s", out.String(), stderr.String())
			if !at.MatchString(lastLineOf(out.String())) {
				t.Fatalf("the demo never printed a line matching %s", c.at)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("rightsize demo with its output closed: %v; want exit code 1", err)
			}
			if !regexp.MustCompile(`^rightsize: demo: its output was closed; stopped, .*; nothing is left\n$`).MatchString(stderr.String()) {
				t.Errorf("stderr %q; want one line saying the output was closed and nothing is left", stderr.String())
			}
			var runIDs []string
			for _, m := range reRun.FindAllStringSubmatch(out.String(), -1) {
				runIDs = append(runIDs, m[2])
			}
			checkNothingLeft(t, api, submatch(t, reDemoID, out.String(), 1), submatch(t, reCache, out.String(), 1), tmp, runIDs...)
		})
	}
}

func lastLineOf(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestDemoOwnerClosesItsSession runs the demo's test process alone, with
// no demo and no sweep after it: once it is ready, the engine has its two
// containers and its network; when its stdin ends, its session's Close
// must remove them all, and its ledger files, before it exits 0.
func TestDemoOwnerClosesItsSession(t *testing.T) {
	bin, env, _, api := demoSetup(t)
	cache := t.TempDir()
	id := randomHex()
	t.Cleanup(func() { removeLabelled(t, api, demoLabel+"="+id) })
	cmd := exec.Command(bin, demoOwnerCommand, testimage.Busybox(t), id)
	cmd.Env = append(env, "RIGHTSIZE_CACHE_DIR="+cache, "RIGHTSIZE_BACKEND=docker", "RIGHTSIZE_REAPER=on")
	var stderr bytes.Buffer
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
	defer cmd.Process.Kill()
	lines := map[string]string{}
	for sc := bufio.NewScanner(stdout); sc.Scan() && sc.Text() != "ready"; {
		k, v, _ := strings.Cut(sc.Text(), " ")
		lines[k] = v
	}
	run, wd := lines["run"], lines["watchdog"]
	if run == "" || wd == "" {
		t.Fatalf("the test process said %q before it was ready (stderr %q); want its run and its watchdog", lines, stderr.String())
	}
	count := func() (ctrs, nets int) {
		f := client.Filters{}.Add("label", docker.LabelRunID+"="+run)
		cl, err := api.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		nl, err := api.NetworkList(context.Background(), client.NetworkListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		return len(cl.Items), len(nl.Items)
	}
	if c, n := count(); c != 2 || n != 1 {
		t.Fatalf("ready, the engine lists %d containers and %d networks of run %s; want 2 and 1", c, n, run)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the test process, its stdin closed: %v; stderr %q", err, stderr.String())
	}
	if c, n := count(); c != 0 || n != 0 {
		t.Errorf("after the test process closed its session, the engine lists %d containers and %d networks of run %s", c, n, run)
	}
	if _, err := ledger.ReadRun(cache, run); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the test process closed its session, its ledger files: %v; want none", err)
	}
	pid, _ := strconv.Atoi(wd)
	if !proctest.Poll(30*time.Second, func() bool { _, alive, err := ledger.Lookup(pid); return err == nil && !alive }) {
		t.Errorf("its watchdog (pid %d) still runs 30 s after the test process exited", pid)
	}
}

// checkNothingLeft: no container or network with the demo's label or its
// runs' labels, no cache dir, no file in the temporary folder, no test
// process or watchdog still running.
func checkNothingLeft(t *testing.T, api *client.Client, id, cache, tmp string, runIDs ...string) {
	t.Helper()
	ctx := context.Background()
	labels := []string{demoLabel + "=" + id}
	for _, r := range runIDs {
		labels = append(labels, docker.LabelRunID+"="+r, docker.LabelRunIDAlt+"="+r)
	}
	for _, l := range labels {
		f := client.Filters{}.Add("label", l)
		cl, err := api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		nl, err := api.NetworkList(ctx, client.NetworkListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cl.Items {
			t.Errorf("container %s (%s) labelled %s is left", c.Names, c.State, l)
		}
		for _, n := range nl.Items {
			t.Errorf("network %s labelled %s is left", n.Name, l)
		}
		if len(cl.Items)+len(nl.Items) > 0 {
			removeLabelled(t, api, l)
		}
	}
	if _, err := os.Lstat(cache); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the demo's cache dir %s is left (%v)", cache, err)
		os.RemoveAll(cache)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files left in the demo's temporary folder: %q", names)
	}
	// A test process or a watchdog still running names the demo or its
	// cache dir on its command line.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		line := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		if (strings.Contains(line, demoOwnerCommand) && strings.Contains(line, id)) || strings.Contains(line, cache) {
			t.Errorf("process %s still runs: %s", filepath.Base(filepath.Dir(p)), line)
		}
	}
}

func submatch(t *testing.T, re *regexp.Regexp, s string, i int) string {
	t.Helper()
	m := re.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no line matching %s in the output", re)
	}
	return m[i]
}

// TestDemoKilled: a demo SIGKILLed with leftovers and no watchdog cannot
// clean up; the next demo sweeps what it left, as the next test process
// sweeps a crashed one's.
func TestDemoKilled(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the killed demo's child is found by its command line in /proc")
	}
	bin, env, tmp, api := demoSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cmd := exec.CommandContext(ctx, bin, "demo")
	cmd.Env = env
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var first strings.Builder
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		first.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "5. ") {
			cmd.Process.Kill()
			break
		}
	}
	go io.Copy(io.Discard, pipe)
	cmd.Wait()
	id1 := submatch(t, reDemoID, first.String(), 1)
	cache1 := submatch(t, reCache, first.String(), 1)
	var runIDs []string
	for _, m := range reRun.FindAllStringSubmatch(first.String(), -1) {
		runIDs = append(runIDs, m[2])
	}
	t.Cleanup(func() { removeLabelled(t, api, demoLabel+"="+id1) })
	if _, err := os.Stat(cache1); err != nil {
		t.Fatalf("the killed demo's cache dir: %v; want it left behind for the next demo", err)
	}

	cmd = exec.CommandContext(ctx, bin, "demo")
	cmd.Env = env
	out, err := cmd.Output()
	t.Logf("the next demo:\n%s", out)
	if err != nil {
		t.Fatalf("rightsize demo after a killed one: %v", err)
	}
	if !regexp.MustCompile(`(?m)^  before +1 killed demo had left 2 containers and 1 network: removed, and its cache dir$`).Match(out) {
		t.Error("the next demo does not say it removed what the killed one left")
	}
	checkNothingLeft(t, api, id1, cache1, tmp, runIDs...)
	checkNothingLeft(t, api, submatch(t, reDemoID, string(out), 1), submatch(t, reCache, string(out), 1), tmp)
}
