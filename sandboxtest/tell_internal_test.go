package sandboxtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// tellCase sets where fates may be told for one test: tty is the stand-in
// for the terminal (a regular file: this machine's test processes have no
// controlling terminal), "" for none.
func tellCase(t *testing.T, tty string, shownV bool) *proctest.Buffer {
	t.Helper()
	oldTTY, oldShown, oldJSON := ttyPath, stderrShown, toJSON
	ttyPath, stderrShown, toJSON = tty, func() bool { return shownV }, func() bool { return false }
	t.Cleanup(func() { ttyPath, stderrShown, toJSON = oldTTY, oldShown, oldJSON; markShown(false) })
	t.Setenv(envStepSummary, "")
	os.Unsetenv(envStepSummary)
	return captureStderr(t)
}

// oneFate is a cache dir holding the fate of one crashed run.
func oneFate(t *testing.T) string {
	t.Helper()
	cache := t.TempDir()
	_, err := ledger.WriteFate(cache, ledger.Fate{Run: "dead0042", By: reaper.ByWatchdog,
		Owner: ledger.FateOwner{PID: 4242, Writer: "go", Command: "store.test -test.timeout=10m0s"},
		Items: []ledger.FateItem{{Kind: "sandbox", Name: "rz-dead0042-1", Outcome: ledger.Removed}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cache
}

func untold(t *testing.T, cache string) int {
	t.Helper()
	return len(reaper.UntoldFates(cache, ""))
}

// Under a plain `go test ./...` a passing package's stderr is hidden: the
// fate is printed there but stays untold, for the next process, unless the
// package failed (its output is then shown).
func TestTellFatesHiddenStderr(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed bool
		untold int
		reason string
	}{
		{"package passed", false, 1, "go test hid the line: the next process tells it again"},
		{"package failed", true, 0, "go test showed the failed package's output, line included"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tellCase(t, "", false)
			cache := oneFate(t)
			tellFates(cache, "own00001")
			if !strings.Contains(errs.String(), "rightsize: run dead0042 (pid 4242") {
				t.Fatalf("the fate was not printed on stderr:\n%s", errs)
			}
			if n := untold(t, cache); n != 1 {
				t.Fatalf("before the package's end %d fates are untold, want 1", n)
			}
			markShown(tc.failed)
			if n := untold(t, cache); n != tc.untold {
				t.Errorf("%d fates untold, want %d: %s", n, tc.untold, tc.reason)
			}
		})
	}
}

// A terminal, the CI job's summary, or -v surely show the fate: it is told
// there and marked told at once.
func TestTellFatesSurelySeen(t *testing.T) {
	t.Run("terminal", func(t *testing.T) {
		tty := filepath.Join(t.TempDir(), "tty")
		if err := os.WriteFile(tty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		errs := tellCase(t, tty, false)
		cache := oneFate(t)
		tellFates(cache, "")
		got, _ := os.ReadFile(tty)
		if !strings.Contains(string(got), "rightsize: run dead0042") {
			t.Errorf("the terminal got %q, want the fate's line", got)
		}
		if strings.Contains(errs.String(), "dead0042") {
			t.Errorf("told on the terminal and on stderr (a failing package would show it twice):\n%s", errs)
		}
		if n := untold(t, cache); n != 0 {
			t.Errorf("%d fates untold after the terminal got them, want 0", n)
		}
	})
	t.Run("job summary", func(t *testing.T) {
		errs := tellCase(t, "", false)
		summary := filepath.Join(t.TempDir(), "step_summary")
		if err := os.WriteFile(summary, []byte("# earlier step\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv(envStepSummary, summary)
		cache := oneFate(t)
		tellFates(cache, "")
		got, _ := os.ReadFile(summary)
		if !strings.HasPrefix(string(got), "# earlier step\n") || !strings.Contains(string(got), "\n    rightsize: run dead0042 (pid 4242") {
			t.Errorf("the summary holds %q, want what it held, then the fate's line in an indented block", got)
		}
		if !strings.Contains(errs.String(), "rightsize: run dead0042") {
			t.Errorf("the fate is not on stderr too:\n%s", errs)
		}
		if n := untold(t, cache); n != 0 {
			t.Errorf("%d fates untold after the summary got them, want 0", n)
		}
	})
	t.Run("verbose", func(t *testing.T) {
		errs := tellCase(t, "", true)
		cache := oneFate(t)
		tellFates(cache, "")
		if !strings.Contains(errs.String(), "rightsize: run dead0042") {
			t.Errorf("not on stderr under -v:\n%s", errs)
		}
		if n := untold(t, cache); n != 0 {
			t.Errorf("%d fates untold under -v, want 0", n)
		}
	})
}
