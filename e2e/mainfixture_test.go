//go:build linux

package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
