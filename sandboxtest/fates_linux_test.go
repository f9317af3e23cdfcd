package sandboxtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

func init() { memoryRoles["two-watchdogs"] = twoWatchdogsOwner }

// twoWatchdogsOwner starts a local process and a memory sandbox, in the
// order RZ_TEST_ORDER says, says what they are, and waits to be killed.
func twoWatchdogsOwner(t *testing.T) {
	var sandbox string
	start := func() { sandbox = sandboxtest.Start(t, sandboxtest.Spec{Image: "memory/idle"}).Name() }
	proc := func() { sandboxtest.StartProcess(t, exec.Command("/bin/sh", "-c", "sleep 1000 & exec sleep 1000")) }
	if os.Getenv("RZ_TEST_ORDER") == "process-first" {
		proc()
		start()
	} else {
		start()
		proc()
	}
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("run", in.RunID)
	proctest.Say("watchdog", strconv.Itoa(in.WatchdogPID))
	proctest.Say("sandbox", sandbox)
	proctest.Block()
}

// TestMemoryTwoWatchdogsOneFate: a run with a local process has two
// watchdogs (the script one of its sandboxes beside a native one of its
// processes; or two native ones, when the process came before the first
// sandbox), and its death is one fate, which tells what both did: the
// sandbox removed by the run's main watchdog, the processes ended.
func TestMemoryTwoWatchdogsOneFate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, order, watchdog string }{
		{"script beside native", "sandbox-first", "script"},
		{"process first, script", "process-first", "script"},
		{"two native", "process-first", "native"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cache := t.TempDir()
			h := startMemoryHelper(t, "two-watchdogs", cache, "RZ_TEST_ORDER="+c.order, reaper.EnvWatchdog+"="+c.watchdog)
			run, sandbox := h.Expect("run"), h.Expect("sandbox")
			wd, _ := strconv.Atoi(h.Expect("watchdog"))
			marks, _ := filepath.Glob(filepath.Join(ledger.FatesPath(cache), "."+run+".watchdog-*"))
			if wd <= 0 || len(marks) != 2 {
				t.Fatalf("the owner's watchdog is pid %d, and its run has %d watchdog marks %q: want two watchdogs", wd, len(marks), marks)
			}
			h.KillAndWait()
			runs := filepath.Join(cache, ledger.RunsDir)
			proctest.WaitUntil(t, 30*time.Second, "both watchdogs to reap the run and end", func() bool {
				return !ledger.HasFiles(runs, run) && ledger.LiveWatchdog(cache, run) == 0
			})
			// The last watchdog deletes them one by one, after its own is gone.
			proctest.WaitUntil(t, 10*time.Second, "the run's watchdog marks to go once both watchdogs reaped it", func() bool {
				marks, _ := filepath.Glob(filepath.Join(ledger.FatesPath(cache), "."+run+".watchdog-*"))
				return len(marks) == 0
			})
			fates, err := ledger.ReadFates(cache)
			if err != nil {
				t.Fatal(err)
			}
			var mine []ledger.FateFile
			for _, f := range fates {
				if f.Run == run {
					mine = append(mine, f)
				}
			}
			if len(mine) != 1 {
				var each []string
				for _, f := range mine {
					each = append(each, filepath.Base(f.Path)+": by "+f.By+" (pid "+strconv.Itoa(f.ByPID)+")")
				}
				t.Fatalf("one death, %d fates, want 1: %s", len(mine), strings.Join(each, "; "))
			}
			f := mine[0]
			if f.Err != nil {
				t.Fatalf("the fate: %v", f.Err)
			}
			var removed, ended int
			for _, it := range f.Items {
				switch {
				case it.Kind == "sandbox" && it.Name == sandbox && it.Outcome == ledger.Removed:
					removed++
				case it.Kind == "process" && it.Outcome == ledger.Ended:
					ended++
				}
			}
			if removed != 1 || ended == 0 || f.ByPID != wd {
				t.Errorf("the fate (by %s, pid %d; the main watchdog is %d) tells the sandbox removed %d times and %d processes ended, want once and some: %+v", f.By, f.ByPID, wd, removed, ended, f.Items)
			}
		})
	}
}
