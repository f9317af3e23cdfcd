package sandboxtest_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// fixture is the test package whose TestMain uses sandboxtest.Main: a
// network and two sandboxes from setup shared by its three parallel tests,
// and RZ_FIXTURE_MODE to end it badly.
const (
	fixturePkg   = "./sandboxtest/testdata/mainfixture"
	missingImage = "rightsize-test/does-not-exist:mainfixture"
)

// TestSuiteMainFixture runs the fixture package in a process of its own,
// each way a suite can end, and checks that nothing of its run is left: no
// container or network with its run label (either spelling), no ledger file.
func TestSuiteMainFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a test package: not with -short")
	}
	img := testimage.Busybox(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build the fixture: %v", err)
	}
	d, err := docker.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })

	// One build for the cases that run the binary directly; the cases that
	// go through `go test` find its packages in the build cache.
	bin := filepath.Join(t.TempDir(), "mainfixture.test")
	start := time.Now()
	build := exec.Command(goBin, "test", "-c", "-o", bin, fixturePkg)
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c %s: %v\n%s", fixturePkg, err, out)
	}
	t.Logf("built the fixture in %v", time.Since(start).Round(time.Millisecond))

	tests := []struct {
		name string
		mode string
		// args after the go command (goTest) or the binary.
		goTest bool
		args   []string
		// watchdog: the binary does not reach the end of Main, so the
		// watchdog removes what is left and the check polls. Without it,
		// the run has no watchdog (RIGHTSIZE_REAPER=sweep), so that only
		// Main can have removed anything, and the check is made once, as
		// soon as the process has exited.
		watchdog bool
		wantCode int // -1: any failure
		wantOut  []string
		// startsNothing: no container of the run was ever created.
		startsNothing bool
		reason        string
	}{{
		name:     "normal",
		goTest:   true,
		args:     []string{"test", "-count=1", fixturePkg},
		wantCode: 0,
		wantOut:  []string{"ok  \tgithub.com/rightsize/rightsize-go/sandboxtest/testdata/mainfixture"},
		reason:   "Main stops the suite's sandboxes and the network before os.Exit",
	}, {
		name:     "setup fails",
		mode:     "setupfail",
		args:     []string{"-test.count=1"},
		wantCode: 1,
		wantOut:  []string{"sandboxtest: suite setup failed: start " + missingImage + " (Setup (TestMain) at main_test.go:"},
		reason:   "Main removes what setup started, prints one line naming the image and exits 1",
	}, {
		name:     "a test needs a sandbox that cannot start",
		mode:     "testneeds",
		args:     []string{"-test.count=1", "-test.v"},
		wantCode: 1,
		wantOut:  []string{"--- FAIL: TestOne", "sandboxtest: the suite's sandbox: start " + missingImage + " (Setup (TestMain) at main_test.go:", "--- PASS: TestTwo", "--- PASS: TestThree"},
		reason:   "the suite's sandbox starts at its first use: its failure fails the test that needs it, with the cause, and no other",
	}, {
		name:          "no test runs",
		args:          []string{"-test.count=1", "-test.run=^$"},
		wantCode:      0,
		startsNothing: true,
		reason:        "with no test to use them (go test -run '^$' -bench .), the suite's sandboxes never start",
	}, {
		name:     "a test panics",
		mode:     "panic",
		args:     []string{"-test.count=1"},
		watchdog: true,
		wantCode: 2,
		wantOut:  []string{"panic: mainfixture: a test panics"},
		reason:   "the binary dies in the test: the watchdog removes everything",
	}, {
		name:     "go test -timeout",
		mode:     "block",
		goTest:   true,
		args:     []string{"test", "-count=1", "-timeout=5s", fixturePkg},
		watchdog: true,
		wantCode: 1,
		wantOut:  []string{"panic: test timed out after 5s", "TestTwo"},
		reason:   "testing's alarm panics with no cleanup run: the watchdog removes everything",
	}, {
		name:     "os.Exit in a test",
		mode:     "exit3",
		args:     []string{"-test.count=1"},
		watchdog: true,
		wantCode: 3,
		reason:   "os.Exit skips Main's close: the watchdog removes everything",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cache := t.TempDir()
			idFile := filepath.Join(cache, "run-id")
			env := fixtureEnv(
				"RIGHTSIZE_CACHE_DIR="+cache,
				"TESTCONTAINERS_RYUK_DISABLED=true",
				"RIGHTSIZE_BACKEND=docker",
				"RIGHTSIZE_REAPER="+map[bool]string{true: "on", false: "sweep"}[tc.watchdog],
				"RZ_FIXTURE_IMAGE="+img,
				"RZ_FIXTURE_RUNID_FILE="+idFile,
				"RZ_FIXTURE_MODE="+tc.mode,
			)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
			defer cancel()
			var cmd *exec.Cmd
			if tc.goTest {
				cmd = exec.CommandContext(ctx, goBin, tc.args...)
			} else {
				cmd = exec.CommandContext(ctx, bin, tc.args...)
			}
			cmd.Dir, cmd.Env = "..", env
			start := time.Now()
			outb, err := cmd.CombinedOutput()
			ran := time.Since(start)
			out := string(outb)

			id, rerr := os.ReadFile(idFile)
			runID := string(id)
			if rerr != nil || !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(runID) {
				t.Fatalf("no run id from the fixture (%v, %q); it said (%v):\n%s", rerr, id, err, out)
			}
			// Whatever the outcome, nothing of the fixture's outlives the test.
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if removed, err := d.CloseRun(ctx, runID); err != nil || len(removed) > 0 {
					t.Logf("cleanup of run %s removed %q (%v)", runID, removed, err)
				}
			})

			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("running the fixture: %v\n%s", err, out)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d (%s); output:\n%s", code, tc.wantCode, tc.reason, out)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("output does not contain %q (%s):\n%s", w, tc.reason, out)
				}
			}
			if tc.mode == "setupfail" {
				assertOneSetupLine(t, out)
			}
			if tc.startsNothing {
				if n := containersCreated(t, runID, start); n != 0 {
					t.Errorf("%d containers of run %s were created (%s)", n, runID, tc.reason)
				}
			}

			left := func() string { return leftovers(t, d, cache, runID) }
			if !tc.watchdog {
				if l := left(); l != "" {
					t.Errorf("when the fixture exited (%s): %s", tc.reason, l)
				}
				t.Logf("exit %d after %v; nothing left at exit", code, ran.Round(time.Millisecond))
				return
			}
			gone := time.Now()
			deadline := gone.Add(15 * time.Second)
			for {
				l := left()
				if l == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("15 s after the fixture exited (%s): %s", tc.reason, l)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("exit %d after %v; everything gone %v after the exit", code, ran.Round(time.Millisecond), time.Since(gone).Round(time.Millisecond))
		})
	}
}

// fixtureEnv is this process's environment with set ("KEY=value") applied,
// minus what would change the fixture's backend or reaping behind the
// test's back.
func fixtureEnv(set ...string) []string {
	env := envlist.Without(os.Environ(), func(k string) bool { return k == "RIGHTSIZE_REUSE" })
	return envlist.Merge(env, set...)
}

// assertOneSetupLine checks that a setup failure is reported in exactly one
// line of the output.
func assertOneSetupLine(t *testing.T, out string) {
	t.Helper()
	n := 0
	for l := range strings.Lines(out) {
		if strings.Contains(l, "sandboxtest:") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d lines of the output come from sandboxtest, want the one naming the cause:\n%s", n, out)
	}
}

// leftovers describes what run runID still has on the engine and in the
// ledger of cache; "" when nothing.
func leftovers(t *testing.T, d *docker.Driver, cache, runID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var left []string
	ctrs, err := d.ListRun(ctx, backend.SandboxKind, runID)
	if err != nil {
		return "listing the run's containers: " + err.Error()
	}
	nets, err := d.ListRun(ctx, backend.NetworkKind, runID)
	if err != nil {
		return "listing the run's networks: " + err.Error()
	}
	for _, c := range ctrs {
		left = append(left, "container "+c)
	}
	for _, n := range nets {
		left = append(left, "network "+n)
	}
	rec, sbx, nts := ledger.Paths(filepath.Join(cache, ledger.RunsDir), runID)
	for _, p := range []string{rec, ledger.OwnRecordPath(filepath.Join(cache, ledger.RunsDir), runID), sbx, nts} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			left = append(left, "ledger file "+filepath.Base(p))
		}
	}
	return strings.Join(left, ", ")
}

// containersCreated counts the containers labelled with run that the
// engine created since since, from its event log.
func containersCreated(t *testing.T, run string, since time.Time) int {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res := cli.Events(ctx, client.EventsListOptions{
		Since:   strconv.FormatInt(since.Add(-time.Second).Unix(), 10),
		Until:   strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10),
		Filters: client.Filters{}.Add("type", "container").Add("event", "create").Add("label", docker.LabelRunID+"="+run),
	})
	n := 0
	for {
		select {
		case _, ok := <-res.Messages:
			if !ok {
				return n
			}
			n++
		case err := <-res.Err:
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("events: %v", err)
			}
			return n
		}
	}
}
