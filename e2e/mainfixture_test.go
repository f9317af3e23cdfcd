//go:build linux

package e2e_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/enginetest"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

var mainFixture struct {
	once sync.Once
	bin  string
	out  []byte
	err  error
}

// mainFixtureBin builds the mainfixture test binary once per process.
func mainFixtureBin(t *testing.T) string {
	t.Helper()
	goBin := goTool(t)
	mainFixture.once.Do(func() {
		dir, err := os.MkdirTemp("", "rz-mainfixture-")
		if err != nil {
			mainFixture.err = err
			return
		}
		mainFixture.bin = filepath.Join(dir, "mainfixture.test")
		mainFixture.out, mainFixture.err = exec.Command(goBin, "test", "-c", "-o", mainFixture.bin, "./mainfixture").CombinedOutput()
	})
	if mainFixture.err != nil {
		t.Fatalf("go test -c ./mainfixture: %v\n%s", mainFixture.err, mainFixture.out)
	}
	return mainFixture.bin
}

// runMainFixture runs the fixture in mode with env added, in a session of
// its own (no terminal to tell fates on), and returns what it printed and
// how it ended.
func runMainFixture(t *testing.T, mode string, env ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mainFixtureBin(t), "-test.timeout=2m")
	cmd.Env = append(append(os.Environ(), "RZ_MAIN_FIXTURE="+mode, "GITHUB_STEP_SUMMARY="), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A binary that ends through Main, having started a command whose child
// left its session (a daemon): its watchdog finds that child, and the
// run's fate says the run ended with its exit code and left something
// behind, never that it died; so does the line a later process or
// `rightsize ls --fates` shows. The memory backend: no engine is needed
// for local processes.
func TestRunEndedNormallyIsNotToldDead(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid(1) here")
	}
	t.Parallel()
	cache := t.TempDir()
	out, err := runMainFixture(t, "daemon", "RIGHTSIZE_BACKEND=memory", "RIGHTSIZE_CACHE_DIR="+cache)
	m := regexp.MustCompile(`fixture: run=(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the fixture said no run (%v):\n%s", err, out)
	}
	run := m[1]
	t.Cleanup(func() {
		for _, pid := range proctree.Live(proctree.OfRun(run)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("the fixture: %v\n%s", err, out)
	}
	var fate ledger.FateFile
	poll(t, goneWithin, "the run's fate", func() (bool, string) {
		fates, err := ledger.ReadFates(cache)
		for _, f := range fates {
			if f.Run == run {
				fate = f
				return true, ""
			}
		}
		return false, "none yet (" + errString(err) + ")"
	})
	if !fate.Owner.Ended || fate.Owner.ExitCode != code {
		t.Errorf("the fate's owner is %+v, want ended with exit %d", fate.Owner, code)
	}
	line := reaper.FateLine(fate)
	if strings.Contains(line, " died") || !strings.Contains(line, "ended (exit ") {
		t.Errorf("the fate's line says the run died, or not that it ended:\n%s", line)
	}
	escaped := false
	for _, it := range fate.Items {
		escaped = escaped || it.Kind == "process" && it.Outcome == ledger.Escaped
	}
	if !escaped {
		t.Errorf("the fate tells no process that escaped: %+v", fate.Items)
	}
	t.Logf("exit %d; the fate: %s", code, line)
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// gotestsumVersion is the gotestsum this test installs through the module
// proxy.
const gotestsumVersion = "v1.13.0"

// A passing package run under gotestsum (go test -json underneath; the
// way GitLab documents JUnit reports), with no terminal: gotestsum shows
// nothing of a passing package's output, so a fate Main finds must either
// be in what gotestsum printed or stay untold for the next process. It
// used to be marked told at once, under -json's -test.v, and was then
// seen nowhere.
func TestFateUnderGotestsum(t *testing.T) {
	t.Parallel()
	goBin := goTool(t)
	gobin := t.TempDir()
	install := exec.Command(goBin, "install", "gotest.tools/gotestsum@"+gotestsumVersion)
	install.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Skipf("gotestsum %s cannot be installed through the module proxy here: %v\n%s", gotestsumVersion, err, out)
	}
	cache := t.TempDir()
	const dead = "dead5e11"
	if _, err := ledger.WriteFate(cache, ledger.Fate{Run: dead, By: reaper.ByWatchdog,
		Owner: ledger.FateOwner{PID: 4242, Writer: "go", Command: "store.test"},
		Items: []ledger.FateItem{{Kind: "sandbox", Name: "rz-" + dead + "-1", Outcome: ledger.Removed}}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(gobin, "gotestsum"), "--format", "pkgname", "--", "-count=1", "./mainfixture")
	cmd.Env = append(os.Environ(), "RZ_MAIN_FIXTURE=tell", "RIGHTSIZE_BACKEND=memory", "RIGHTSIZE_CACHE_DIR="+cache, "GITHUB_STEP_SUMMARY=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no terminal to tell it on
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("gotestsum of a passing package: %v\n%s", err, out)
	}
	shown := strings.Contains(out, "rightsize: run "+dead)
	untold := len(reaper.UntoldFates(cache, "")) == 1
	if !shown && !untold {
		t.Fatalf("the fate was marked told, and gotestsum showed nothing of it:\n%s", out)
	}
	t.Logf("shown by gotestsum: %v; left untold for the next process: %v\n%s", shown, untold, out)
}

// When testcontainers-go's one look at the engine, through the guard,
// fails (an engine that dropped the request), it takes another engine (the
// default socket) for the life of the process: every container it made
// would pass the guard, unlabelled and unlisted, and outlive a killed
// binary. Main(GuardAll) runs no test then, and says why (not that
// something made a client before Main). (The chaos
// harness found it under its fault proxy.)
func TestGuardAllFirstLookFailed(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	engine, ok := strings.CutPrefix(r.eng.Client().DaemonHost(), "unix://")
	if !ok {
		t.Skip("the engine is not on a unix socket here")
	}
	tag := nonceHex(t)
	t.Cleanup(func() { removeTagLabelled(t, r.eng.Client(), tag) })
	sock := filepath.Join(shortDir(t), "look.sock")
	failed := enginetest.FailLook(t, sock, engine)
	out, err := runMainFixture(t, "lookfails", "RZ_FIXTURE_IMAGE="+r.img, "RZ_FIXTURE_TAG="+tag,
		"RIGHTSIZE_CACHE_DIR="+r.cache, "TESTCONTAINERS_RYUK_DISABLED=true", "TMPDIR="+shortDir(t), "DOCKER_HOST=unix://"+sock)
	if !failed.Load() {
		t.Fatalf("testcontainers-go's look never came to the proxy that fails it:\n%s", out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("the fixture ended %v, want exit status 1 before any test:\n%s", err, out)
	}
	if !strings.Contains(out, "sandboxtest: GuardAll: ") || !strings.Contains(out, "first look at the engine, through the guard, failed") {
		t.Errorf("Main did not say that testcontainers-go took another engine than the guard:\n%s", out)
	}
	if strings.Contains(out, "fixture: container=") {
		t.Errorf("a test ran, and created a container past the guard:\n%s", out)
	}
	t.Logf("%s", strings.TrimSpace(out))
}

// removeTagLabelled removes the containers the main fixture labelled with
// tag.
func removeTagLabelled(t *testing.T, cli *client.Client, tag string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := client.Filters{}.Add("label", "dev.rightsize.test.mainfixture="+tag)
	if cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cs.Items {
			if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
				t.Errorf("removing the fixture's container %s: %v", c.ID, err)
			}
		}
	}
}

// A testcontainers-go provider made by a package-level variable, before
// Main(GuardAll) pointed DOCKER_HOST at the guard, keeps the engine
// itself for the life of the process: its containers would escape the
// guard without a word, and outlive a killed binary. Main refuses to run
// the tests, saying why and what to do; nothing is created.
func TestGuardAllProviderMadeBeforeMain(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	tag := nonceHex(t)
	cli := r.eng.Client()
	t.Cleanup(func() { removeTagLabelled(t, cli, tag) })
	out, err := runMainFixture(t, "early", "RZ_FIXTURE_IMAGE="+r.img, "RZ_FIXTURE_TAG="+tag,
		"RIGHTSIZE_CACHE_DIR="+r.cache, "TESTCONTAINERS_RYUK_DISABLED=true", "TMPDIR="+shortDir(t))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("the fixture ended %v, want exit status 1 before any test:\n%s", err, out)
	}
	if !strings.Contains(out, "sandboxtest: GuardAll: testcontainers-go found its engine") || !strings.Contains(out, "package-level variable or an init") {
		t.Errorf("Main did not say that testcontainers-go was set up before it, and what to do:\n%s", out)
	}
	if strings.Contains(out, "fixture: container=") {
		t.Errorf("a test ran, and created a container past the guard:\n%s", out)
	}
	t.Logf("%s", strings.TrimSpace(out))
}
