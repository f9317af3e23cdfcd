package reaper

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper/scripts"
)

// EnvDebug, set to 1, makes the watchdog log what it does to
// <cache>/reaper/watchdog-<run-id>.log instead of discarding its output.
const EnvDebug = "RIGHTSIZE_REAPER_DEBUG"

// Watchdog is a spawned watchdog process.
type Watchdog struct {
	// PID of the watchdog process.
	PID int
	// Script is the path of the script it runs.
	Script string
	// Log is the debug log file, when RIGHTSIZE_REAPER_DEBUG=1.
	Log string

	exited chan struct{}
	err    error
	// lease is the write end of its stdin, also held in leases.
	lease *os.File
}

// Exited is closed when the watchdog process ends (which, while this
// process lives, means it failed).
func (w *Watchdog) Exited() <-chan struct{} { return w.exited }

// Err is why the watchdog ended, once Exited is closed.
func (w *Watchdog) Err() error { <-w.exited; return w.err }

// leases holds the write end of every watchdog's stdin for the life of the
// process. Being reachable from a package variable, no finalizer ever closes
// one: only the process's exit does, and that exit is what the watchdog
// waits for.
var (
	leasesMu sync.Mutex
	leases   []*os.File
)

// StartWatchdog writes the watchdog script to <cache>/reaper/ (when missing)
// and spawns it, detached from this process's session and output, to reap
// run runID of runsDir with plan once this process is gone.
func StartWatchdog(cache, runsDir, runID string, plan backend.WatchdogPlan) (*Watchdog, error) {
	if runID == "" || strings.ContainsAny(runID, `/\`) || strings.HasPrefix(runID, ".") || strings.HasPrefix(runID, "-") {
		return nil, fmt.Errorf("watchdog: run id %q cannot name a run's files", runID)
	}
	args, err := planArgs(plan)
	if err != nil {
		return nil, err
	}
	dir, err := ledger.EnsureSubdir(cache, ledger.ReaperDir)
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	content, ext := scripts.WatchdogSh, ".sh"
	if isWindows {
		content, ext = scripts.WatchdogPs1, ".ps1"
	}
	script, err := installScript(dir, content, ext)
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	interp, err := interpreter()
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}

	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog: pipe: %w", err)
	}
	cmd := exec.Command(interp[0], append(append(interp[1:], script, runsDir, runID), args...)...)
	cmd.Stdin = r
	cmd.Dir = string(filepath.Separator) // hold no test folder open
	cmd.Env = envlist.Merge(os.Environ(), plan.Env...)
	wd := &Watchdog{Script: script, exited: make(chan struct{})}
	if os.Getenv(EnvDebug) == "1" {
		wd.Log = filepath.Join(dir, "watchdog-"+runID+".log")
		lf, err := os.OpenFile(wd.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err == nil {
			defer lf.Close()
			fmt.Fprintf(lf, "owner pid %d, run %s: %s\n", os.Getpid(), runID, strings.Join(cmd.Args, " "))
			cmd.Stdout, cmd.Stderr = lf, lf
		}
	}
	// Without a log, stdout and stderr are the null device: a watchdog that
	// shared the test's output would keep `go test` waiting for it.
	if err := startDetached(cmd); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("watchdog: start %s: %w", interp[0], err)
	}
	r.Close()
	leasesMu.Lock()
	leases = append(leases, w)
	leasesMu.Unlock()
	wd.PID = cmd.Process.Pid
	wd.lease = w
	go func() {
		wd.err = cmd.Wait()
		if wd.err == nil {
			wd.err = errors.New("watchdog exited while its owner lives")
		}
		close(wd.exited)
	}()
	return wd, nil
}

// planArgs turns the plan into the script's step arguments, one word each.
func planArgs(plan backend.WatchdogPlan) ([]string, error) {
	var args []string
	for i, s := range plan.Steps {
		if s.List != "sandboxes" && s.List != "networks" {
			return nil, fmt.Errorf("watchdog: step %d: list %q", i, s.List)
		}
		if len(s.Command) == 0 || !filepath.IsAbs(s.Command[0]) {
			return nil, fmt.Errorf("watchdog: step %d: command %q must start with an absolute path", i, s.Command)
		}
		mode := "each"
		if s.Batch {
			mode = "batch"
		}
		args = append(args, s.List, mode, strings.Join(s.Gone, "\n"), strings.Join(s.Retry, "\n"), strconv.Itoa(len(s.Command)))
		args = append(args, s.Command...)
	}
	return args, nil
}

// installScript writes content to dir/watchdog-<12 hex of its sha256><ext>
// unless a file with exactly that content is there already.
func installScript(dir string, content []byte, ext string) (string, error) {
	sum := sha256.Sum256(content)
	p := filepath.Join(dir, "watchdog-"+hex.EncodeToString(sum[:])[:12]+ext)
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
		if have, err := os.ReadFile(p); err == nil && bytes.Equal(have, content) {
			return p, nil
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return p, ledger.WriteFileAtomic(p, content)
}
