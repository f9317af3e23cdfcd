package reaper

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/internal/keeper"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/reaper/scripts"
)

// EnvDebug, set to 1, makes the watchdog log what it does to
// <cache>/reaper/watchdog-<run-id>.log instead of discarding its output.
const EnvDebug = "RIGHTSIZE_REAPER_DEBUG"

// EnvWatchdog chooses the kind of watchdog: "script" (a POSIX sh script,
// PowerShell on Windows, that waits and runs this program at the owner's
// death: the default but on Windows), "native" (this program re-executed,
// waiting itself: the default on Windows, and wherever something must be
// held while the owner lives) or "engine" (the native one, holding the
// lease of an engine-side keeper: the default where the engine is another
// machine's; see keeper.go).
const EnvWatchdog = "RIGHTSIZE_WATCHDOG"

// Kinds of watchdog, as Watchdog.Kind says.
const (
	ScriptWatchdog = "script"
	NativeWatchdog = "native"
)

// Watchdog is a spawned watchdog process.
type Watchdog struct {
	// PID of the watchdog process.
	PID int
	// Kind is ScriptWatchdog or NativeWatchdog.
	Kind string
	// Script is the path of a readable copy of the script that waits
	// (script watchdogs only): on Unix the shell was handed the text itself.
	Script string
	// Log is the debug log file, when RIGHTSIZE_REAPER_DEBUG=1.
	Log string

	exited chan struct{}
	err    error

	mu    sync.Mutex
	lease *os.File // the write end of its stdin, also held in leases
	lost  atomic.Bool
}

// Err is why the watchdog ended, once it has: while its owner lives, any
// end is a failure.
func (w *Watchdog) Err() error { <-w.exited; return w.err }

// Tell tells the watchdog that the run created what id names (the engine's
// own id for it, and its name): it removes that at once when this process
// dies. It is a line on the watchdog's stdin; a watchdog that is gone
// makes it fail, and nothing else.
func (w *Watchdog) Tell(k names.Kind, id, name string) error {
	return w.say('+', k.Plural()[:1], id, name)
}

// Untell tells the watchdog that the run removed it itself.
func (w *Watchdog) Untell(k names.Kind, id, name string) error {
	return w.say('-', k.Plural()[:1], id, name)
}

// TellExec tells the watchdog of a command running in sandbox (id: the
// engine's exec id), for the run's fate: if the owner dies first, the
// command's lease ends it.
func (w *Watchdog) TellExec(id, sandbox string) error { return w.say('+', "x", id, sandbox) }

// UntellExec tells the watchdog the command ended.
func (w *Watchdog) UntellExec(id, sandbox string) error { return w.say('-', "x", id, sandbox) }

func (w *Watchdog) say(op byte, letter, id, name string) error {
	if w == nil {
		return nil
	}
	if !names.Valid(id) && !isEngineID(id) || !names.Valid(name) {
		return fmt.Errorf("watchdog: %q / %q is not an id and a name", id, name)
	}
	line := string(op) + letter + " " + id + " " + name + "\n"
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lost.Load() {
		return errors.New("watchdog: gone")
	}
	// Shorter than PIPE_BUF: one write lands whole, whoever else writes.
	if _, err := w.lease.WriteString(line); err != nil {
		w.lost.Store(true)
		return fmt.Errorf("watchdog: %w", err)
	}
	return nil
}

// isEngineID: an engine's own id (hex, any length), which the name grammar
// refuses below 12 digits only to keep a ledger line from being read as an
// id prefix; an id the owner got back from a create is whole.
func isEngineID(s string) bool {
	return len(s) >= 12 && len(s) <= 128 && names.LowerHex(s)
}

// leases holds the write end of every watchdog's stdin for the life of the
// process. Being reachable from a package variable, no finalizer ever closes
// one: only the process's exit does, and that exit is what the watchdog
// waits for.
var (
	leasesMu sync.Mutex
	leases   []*os.File
)

// StartWatchdog spawns a watchdog for run runID of runsDir, detached from
// this process's session and output. Every watchdog's work is this
// program's, re-run as its own watchdog (WatchdogMain): what differs is
// what waits for the owner's death. The script watchdog waits as a shell
// (POSIX sh, PowerShell on Windows) in about 1.7 MiB, and runs the program
// at the death; the native watchdog is the program itself from the start,
// for what must be held while the owner lives (a keeper's lease, a
// Kubernetes Lease, the owner's local processes). RIGHTSIZE_WATCHDOG
// chooses between them where the plan allows it (choosesNative).
func StartWatchdog(cache, runsDir, runID string, plan backend.WatchdogPlan) (*Watchdog, error) {
	return startWatchdog(cache, runsDir, runID, plan, nil)
}

// choosesNative reports whether the native watchdog serves a plan: where
// something must be held while the owner lives (hold: a backend's claim or
// the run's local processes; keeper: an engine-side keeper's lease), where
// it is asked for, and by default on Windows, where the native watchdog is
// the one this repository's tests run (under Wine, which has no
// PowerShell: the script is not run) unless the script is asked for; and where no
// shell can run the script (a container with no /bin/sh). Elsewhere the
// default is the script: its wait holds a shell's 1.7 MiB where the native
// one holds the test binary's 14 MiB (BENCHMARKS.md).
func choosesNative(goos, want string, hold, keeper, scriptable bool) bool {
	switch {
	case hold, keeper, want == NativeWatchdog, !scriptable:
		return true
	case goos == "windows":
		return want != ScriptWatchdog
	}
	return false
}

// startWatchdog is StartWatchdog; a keeper makes the watchdog the native
// one, holding that keeper's lease.
func startWatchdog(cache, runsDir, runID string, plan backend.WatchdogPlan, kept *keeper.Keeper) (*Watchdog, error) {
	if !ledger.ValidRunID(runID) {
		return nil, fmt.Errorf("watchdog: run id %q cannot name a run's files", runID)
	}
	if !nativeCapable.Load() {
		return nil, errors.New("watchdog: this program cannot serve as its own watchdog (it does not import package sandboxtest, nor call reaper.WatchdogMain first thing)")
	}
	dir, err := ledger.EnsureSubdir(cache, ledger.ReaperDir)
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("watchdog: this program's path: %w", err)
	}
	want := strings.ToLower(strings.TrimSpace(os.Getenv(EnvWatchdog)))
	env := append(plan.Env, envNative+"=1", envNativeRuns+"="+runsDir, envNativeRun+"="+runID, envHostProc+"="+noHostProc)
	if plan.ProcessesOnly {
		env = append(env, envNativeProcessesOnly+"=1")
	}
	var cmd *exec.Cmd
	var handed []*os.File // the script's descriptors, closed here once it started
	wd := &Watchdog{exited: make(chan struct{})}
	if choosesNative(runtime.GOOS, want, plan.Hold || plan.ProcessesOnly, kept != nil, scriptable()) {
		cmd = exec.Command(exe)
		cmd.Args = []string{"rightsize-watchdog"}
		if kept != nil {
			// The secret is this user's processes' alone to read, as the
			// ledger is.
			env = append(env, envNativeKeeper+"="+kept.Name, envNativeKeeperSecret+"="+kept.Secret)
		}
		wd.Kind = NativeWatchdog
	} else {
		cmd, wd.Script, handed, err = scriptCommand(dir, runID, exe)
		if err != nil {
			return nil, fmt.Errorf("watchdog: %w", err)
		}
		env = append(env, envNativeAfter+"=1", envScriptProgram+"="+exe)
		wd.Kind = ScriptWatchdog
	}
	defer func() {
		for _, f := range handed {
			f.Close()
		}
	}()
	cmd.Env = envlist.Merge(os.Environ(), env...)

	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog: pipe: %w", err)
	}
	cmd.Stdin = r
	cmd.Dir = string(filepath.Separator) // hold no test folder open
	if os.Getenv(EnvDebug) == "1" {
		wd.Log = LogPath(cache, runID, plan.ProcessesOnly)
		lf, err := ledger.OpenFile(wd.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err == nil {
			defer lf.Close()
			fmt.Fprintf(lf, "owner pid %d, run %s: %s watchdog\n", os.Getpid(), runID, wd.Kind)
			cmd.Stdout, cmd.Stderr = lf, lf
		}
	}
	// Without a log, stdout and stderr are the null device: a watchdog that
	// shared the test's output would keep `go test` waiting for it.
	if err := startDetached(cmd); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("watchdog: start %s: %w", cmd.Path, err)
	}
	r.Close()
	leasesMu.Lock()
	leases = append(leases, w)
	leasesMu.Unlock()
	wd.PID = cmd.Process.Pid
	wd.lease = w
	// Without its mark, a sweep may reap the run beside its watchdog, and
	// one death gets two fates.
	_ = ledger.WriteWatchdogMark(cache, runID, wd.PID)
	go func() {
		wd.err = cmd.Wait()
		if wd.err == nil {
			wd.err = errors.New("watchdog exited while its owner lives")
		}
		wd.lost.Store(true)
		close(wd.exited)
	}()
	return wd, nil
}

// script is one of package scripts' files. They are embedded when this
// program was compiled: a name that is not there is a mistake in this
// package, found by its first test.
func script(name string) []byte {
	b, err := scripts.FS.ReadFile(name)
	if err != nil {
		panic("reaper: the watchdog script " + name + " is not embedded: " + err.Error())
	}
	return b
}

// scriptName is the readable copy's file name: watchdog-<12 hex of the
// content's sha256><ext>, so that each member's scripts stay apart.
func scriptName(content []byte, ext string) string {
	sum := sha256.Sum256(content)
	return "watchdog-" + hex.EncodeToString(sum[:])[:12] + ext
}

// LogPath is where the watchdog of run runID logs in cache, with
// RIGHTSIZE_REAPER_DEBUG=1 (EnvDebug): the reaper folder, and a file of
// its own for the local processes' watchdog beside a script watchdog.
func LogPath(cache, runID string, processesOnly bool) string {
	name := "watchdog-" + runID + ".log"
	if processesOnly {
		name = "watchdog-" + runID + "-processes.log"
	}
	return filepath.Join(cache, ledger.ReaperDir, name)
}
