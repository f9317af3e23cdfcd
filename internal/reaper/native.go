package reaper

import (
	"bufio"
	"cmp"
	"context"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/proctree"
)

// The environment a native watchdog is started with: this program, re-run
// with these set, becomes the watchdog before anything else of it runs.
const (
	envNative     = "RIGHTSIZE_NATIVE_WATCHDOG"
	envNativeRuns = "RIGHTSIZE_NATIVE_WATCHDOG_RUNS"
	envNativeRun  = "RIGHTSIZE_NATIVE_WATCHDOG_RUN"
	// envNativeProcessesOnly: a watchdog of the run's local processes
	// alone, beside a script watchdog of its sandboxes.
	envNativeProcessesOnly = "RIGHTSIZE_NATIVE_WATCHDOG_PROCESSES_ONLY"
	// envNativeAfter: run by the script watchdog once the owner died; it
	// held nothing while it waited, and the run's local processes, if any,
	// have a native watchdog of their own.
	envNativeAfter = "RIGHTSIZE_NATIVE_WATCHDOG_AFTER"
	// envScriptProgram is the script watchdog's PROGRAM: this program's
	// path, which its command line must not show (scripts/watchdog.sh).
	envScriptProgram = "RIGHTSIZE_WATCHDOG_PROGRAM"
	// scriptTitle is the first word of the arguments the script watchdog
	// runs this program with at the owner's death; while it reaps, the
	// process shows them first in its command line (setTitle).
	scriptTitle = "rightsize-watchdog"
	// envHostProc is gopsutil's root of /proc. Every test binary that
	// links testcontainers-go lists every process of the machine in an
	// init (its session id, which a watchdog never uses): 4–10 ms of the
	// script watchdog's way from the owner's death to its first removal.
	// Pointed at no folder, that list fails at once. This module reads
	// /proc itself, never through gopsutil.
	envHostProc = "HOST_PROC"
	noHostProc  = "/nonexistent/rightsize-watchdog-reads-proc-itself"
)

// A watchdog's share of a run's reaping.
type nativeMode int

const (
	allOfRun      nativeMode = iota // the engine's objects and the local processes
	engineOnly                      // the engine's objects (the script watchdog's)
	processesOnly                   // the local processes (beside a script watchdog)
)

// nativeCapable is set once WatchdogMain has run in this program: only
// then can it be re-executed as a watchdog.
var nativeCapable atomic.Bool

// WatchdogMain makes this program able to serve as its own native
// watchdog, the one used where the engine's command line is missing (the
// official golang images, a CI job beside a docker:dind service). Call it
// first thing, before anything reads flags or starts work: when the
// program was started as a watchdog, it does the watchdog's work and
// exits; otherwise it returns at once. Package sandboxtest calls it from
// its init, so a test binary needs nothing.
func WatchdogMain() {
	nativeCapable.Store(true)
	if os.Getenv(envNative) != "1" {
		return
	}
	mode := allOfRun
	switch {
	case os.Getenv(envNativeProcessesOnly) == "1":
		mode = processesOnly
	case os.Getenv(envNativeAfter) == "1":
		mode = engineOnly
	}
	name := os.Getenv(backend.EnvBackend)
	argv := os.Args // the kernel's, whatever becomes of os.Args below
	work := func() {
		if mode == engineOnly && len(argv) > 1 && argv[1] == scriptTitle {
			// Run as /proc/self/fd/3: without its title, the reaping
			// process would say nothing of what it is in `ps`.
			setTitle(argv)
		}
		os.Exit(runNative(os.Stdin, os.Getenv(envNativeRuns), os.Getenv(envNativeRun), name, os.Getenv("DOCKER_HOST"), mode))
	}
	if mode == processesOnly || backend.WhenEndpoint(name, work) {
		work()
	}
	// The backend registers in an init still to come (a package that
	// sandboxtest does not import, such as backend/kubernetes): the work
	// starts from there. Should none come, nothing of the program must run
	// as if it were not a watchdog: package testing stops at this flag,
	// and package sandboxtest at WatchdogWaiting.
	waiting.Store(true)
	os.Args = []string{os.Args[0], "-rightsize-watchdog-backend-never-registered=" + name}
}

// waiting is set while this program, started as a watchdog, waits for its
// backend to register.
var waiting atomic.Bool

// WatchdogWaiting reports whether this program was started as a watchdog
// whose backend has not registered: it must do nothing else, and exits
// saying so.
func WatchdogWaiting() bool { return waiting.Load() }

// runNative is every watchdog's work: it opens the engine, reads stdin to
// its EOF while taking note of what the owner tells it (for the native
// watchdog, the wait itself; for the script's, the lines the script kept),
// then, with the engine's API, removes what it was told by id; a moment
// later finds what still carries the run's label and removes that (on a
// backend that lists nothing by label, msb, it removes the told names,
// each as its labels allow); writes the
// run's fate; deletes the run's files when nothing of it is left. Beside
// that, it ends the run's local processes (those its marks, the groups of
// the commands it was told and their descent prove: proctree.End). Mode
// processesOnly opens no engine and does only the latter; engineOnly only
// the former.
func runNative(in io.Reader, runsDir, runID, backendName, endpoint string, mode nativeMode) int {
	runtime.GOMAXPROCS(1)
	debug.SetGCPercent(20) // it holds almost nothing: keep the heap small
	logger := log.New(os.Stderr, "rightsize watchdog ["+runID+"]: ", 0)
	if runsDir == "" || !ledger.ValidRunID(runID) {
		logger.Printf("refusing runs dir %q, run %q", runsDir, runID)
		return 2
	}
	var b backend.Backend // nil: local processes only
	if mode != processesOnly {
		drv, err := backend.OpenEndpoint(backendName, endpoint)
		if err != nil {
			logger.Printf("open %s at %s: %v", backendName, endpoint, err)
			return 2
		}
		defer drv.Close()
		b = drv
		if ref := os.Getenv(envNativeKeeper); ref != "" {
			// Held for the watchdog's whole life: it lets go once its
			// own work is done, and the keeper then ends.
			if l := holdKeeper(drv, runID, ref, os.Getenv(envNativeKeeperSecret), logger); l != nil {
				defer l.Close()
			}
		}
		if w, ok := drv.(interface{ Warm() }); ok && mode == allOfRun {
			// While the owner lives: the engine's answers the removals
			// need are then known when it dies.
			go func() {
				w.Warm()
				// What start-up and the warm-up allocated goes back to
				// the system for the wait.
				debug.FreeOSMemory()
			}()
		} else if mode == allOfRun {
			debug.FreeOSMemory()
		}
	}
	// An engine that holds the run's claim (a Kubernetes Lease) keeps it
	// while the owner lives; dropped at its death, the engine removes the
	// rest itself, and the passes below find it gone.
	holder, _ := b.(backend.RunHolder)
	holdCtx, stopHold := context.WithCancel(context.Background())
	if holder != nil && mode == allOfRun {
		go holder.HoldRun(holdCtx, runID)
	}
	told := readTold(in, runID)
	noticed := time.Now()
	stopHold()
	if holder != nil {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout())
		if err := holder.DropRun(ctx, runID, 0); err != nil {
			logger.Printf("drop the run's claim: %v", err)
		}
		cancel()
	}
	// Until now the owner held each command it told unreaped, and with it
	// its group's number: what started in a group before now is the
	// command's.
	t := target{run: runID, toldNames: told.names, grace: proctree.DefaultGrace}
	if mode != engineOnly {
		t.procs = &proctree.Scope{Marks: proctree.OfRun(runID), Commands: told.commands(), PinnedUntil: proctree.Now()}
	}
	cache := filepath.Dir(runsDir)
	// This watchdog's mark goes with it, whatever its end; never another
	// watchdog's, which may still be at work though the run lists nothing
	// (its processes' lines go once they are ended, and their escaped
	// descendants are still waited for): that one's word is what keeps the
	// death untold until both shares are in (UntoldFates). Left, marks
	// stayed an hour (PruneFates), and every sweep and fate teller reads
	// the folder they crowd: 5,000 of them halved a 10,000-death chaos
	// run's pace.
	defer ledger.RemoveWatchdogMark(cache, runID, os.Getpid())
	if mode != processesOnly {
		logger.Printf("owner gone (stdin closed): reaping run %s in %s", runID, runsDir)
		_, labelled := b.(backend.RunLister)
		var lists ledger.Lists
		if labelled {
			lists = readLists(runsDir, runID, logger)
		}
		for _, k := range names.EngineKinds {
			if labelled && k != names.VolumeKind && k != names.ImageKind {
				t.told[k] = told.ids(k)
				t.listed[k] = told.untold(k, lists.Of(k))
			} else {
				// Told by name, before each create: removed by name (a
				// volume's or an image's with its marks checked).
				t.listed[k] = told.ids(k)
			}
		}
		// Then whatever still carries the run's label, with what the first
		// pass could not remove.
		t.byLabel, t.afterKept, t.settle, t.call, t.giveUp = true, true, settle(), callTimeout(), true
	}
	res := reapRun(context.Background(), b, t)
	for _, it := range res.items {
		if it.Kind != names.ProcessKind && !it.Outcome.Gone() {
			logger.Printf("%s %s: %s (%s)", it.Kind, cmp.Or(it.ID, it.Name), it.Outcome, it.Note)
		}
	}
	by := ByNativeWatchdog
	if mode == engineOnly {
		by = ByWatchdog
	}
	writeNativeFate(cache, runID, by, noticed, res.items, told.execs, logger)
	logProcesses(logger, res.procs)
	// Each share deletes its kinds' line files once they are clean, and
	// RemoveKindFiles the record with the last line file: the script's
	// watchdog and the processes' one each do their part, whichever ends
	// last. A share that is not clean leaves its files to a later sweep.
	var done []names.Kind
	if mode != processesOnly && res.engineClean() {
		done = append(done, names.EngineKinds[:]...)
	}
	if mode != engineOnly && res.procs.Clean() {
		done = append(done, names.ProcessKind)
	}
	if len(done) == 0 {
		logger.Printf("something was kept; the run's files stay for a later sweep")
		return 0
	}
	if err := ledger.RemoveKindFiles(runsDir, runID, done...); err != nil {
		logger.Printf("delete the run's files: %v", err)
		return 0
	}
	if ledger.HasFiles(runsDir, runID) {
		logger.Printf("its share removed; what else the run lists stays, for the run's other watchdog or a later sweep")
		return 0
	}
	// A stub left by a watchdog killed here is pruned with the fates.
	os.Remove(ledger.OwnerStubPath(cache, runID))
	_ = ledger.RemoveOrigins(cache, runID)
	logger.Printf("everything removed; ledger files deleted")
	return 0
}

// writeNativeFate writes the run's fate, when there was anything to tell:
// a run whose owner ended normally has nothing left, and gets none. The
// commands still running in its sandboxes were ended by their leases. A
// run's other watchdog may have written its share of the same death
// already: this one joins it (joinShare).
func writeNativeFate(cache, runID, by string, noticed time.Time, reaped []Item, execs []toldExec, logger *log.Logger) {
	var items []ledger.FateItem
	origins := ledger.ReadOrigins(cache, runID)
	for _, it := range reaped {
		items = append(items, fateItem(it, origins))
	}
	for _, x := range execs {
		items = append(items, ledger.FateItem{Kind: "exec", ID: x.id, Name: x.name, Outcome: ledger.Ended, Note: "its lease ended it when the owner died"})
	}
	if len(items) == 0 {
		return
	}
	now := time.Now()
	fate := ledger.Fate{
		Run: runID, By: by, ByPID: os.Getpid(),
		NoticedISO: ledger.FormatISO(noticed), FinishedISO: ledger.FormatISO(now),
		Owner: ledger.ReadOwnerStub(cache, runID), Items: items,
	}
	if _, err := ledger.JoinFate(cache, fate, now, joinShare(fate)); err != nil {
		logger.Printf("fate: %v", err)
	}
}

// readLists reads the run's line files (not its record, nor the folder's
// listing) for untold; none when the folder is not private.
func readLists(runsDir, runID string, logger *log.Logger) ledger.Lists {
	if err := ledger.CheckPrivate(runsDir); err != nil {
		logger.Printf("the run's lists are not read (%v): only what carries its label is looked for", err)
		return ledger.Lists{}
	}
	return ledger.RunFiles{ID: runID, Dir: runsDir}.ReadLists()
}

// untold is, of listed (a labelled kind k's names in the run's lists), the
// names the owner never told, for the watchdog to ask for by name as a
// sweep does: a create the engine had not answered when the owner died,
// whose id never came. The look by label finds it only if the engine
// makes it within the settle; asked for by name, it is told already gone,
// the run's fate says so, and the sweeps within LateHorizon look for it
// by label again, however late the engine makes it. (Without this, the
// run's files went with the name, no fate told it, and a network a loaded
// engine made 3 s after its owner's death stayed.) Names the owner told,
// and untold again while it removed them itself, are asked for too: a
// removal cut short by the death leaves the line.
func (t *toldSet) untold(k names.Kind, listed []string) []string {
	toldNames := make(map[string]bool, len(t.names[k]))
	for _, n := range t.names[k] {
		toldNames[n] = true
	}
	var out []string
	for _, n := range listed {
		if !toldNames[n] {
			out = append(out, n)
		}
	}
	return out
}

func logProcesses(logger *log.Logger, r proctree.Result) {
	for _, p := range r.Ended {
		logger.Printf("process %d (%s): ended %s", p.PID, p.Command, p.Why)
	}
	for _, p := range r.Escaped {
		logger.Printf("process %d (%s): escaped, not signalled: %s", p.PID, p.Command, p.Why)
	}
	for _, p := range slices.Concat(r.Left, r.NotProven) {
		logger.Printf("process %d (%s): left: %s", p.PID, p.Command, p.Why)
	}
	if r.Unproven != nil {
		logger.Printf("processes: %v", r.Unproven)
	}
}

// toldSet is what the owner told, per kind, in order, the commands
// running in its sandboxes, and its local commands, each held by a pidfd
// on it from the moment it was told.
type toldSet struct {
	run   string
	order [len(names.Kinds)][]string
	names [len(names.Kinds)]map[string]string
	execs []toldExec
	procs map[string]*proctree.Command
}

// commands are the local commands the owner told and did not end itself.
func (t *toldSet) commands() []proctree.Command {
	var out []proctree.Command
	for _, id := range t.order[names.ProcessKind] {
		if c := t.procs[id]; c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// process takes note of a local command: told ("+p PID.TICKS LINE"), it
// is held at once, while the owner keeps it unreaped; untold, released.
func (t *toldSet) process(op byte, id, line string) {
	if c := t.procs[id]; c != nil {
		c.Release()
		delete(t.procs, id)
	}
	if op != '+' || len(t.procs) >= maxToldProcesses {
		return
	}
	c, ok := proctree.ParseLine(t.run, proctree.Started(line, id))
	if !ok || c.PID == 0 {
		return
	}
	c.Hold() // a command gone already is proven by its group's members, or not at all
	t.procs[id] = &c
}

// maxToldProcesses bounds the pidfds a watchdog holds: past it, a command
// is proven by its mark alone.
const maxToldProcesses = 4096

// toldExec is a command running in a sandbox: its exec id and the
// sandbox's name.
type toldExec struct{ id, name string }

func (t *toldSet) ids(k names.Kind) []string { return t.order[k] }

// readTold reads the owner's lines until EOF: "+s ID NAME" adds, "-s ID
// NAME" removes (s, n, p for the kinds); anything else is ignored.
func readTold(in io.Reader, run string) *toldSet {
	t := &toldSet{run: run, procs: map[string]*proctree.Command{}}
	for k := range t.names {
		t.names[k] = map[string]string{}
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 512), 512)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || len(f[0]) != 2 {
			continue
		}
		var k names.Kind
		switch f[0][1] {
		case 'x':
			t.exec(f)
			continue
		case 's':
			k = names.SandboxKind
		case 'n':
			k = names.NetworkKind
		case 'p':
			k = names.ProcessKind
		case 'v':
			k = names.VolumeKind
		case 'i':
			k = names.ImageKind
		default:
			continue
		}
		id, name := f[1], f[1]
		if len(f) > 2 {
			name = f[2]
		}
		if !names.Valid(id) && !isEngineID(id) {
			continue
		}
		if k == names.ProcessKind {
			t.process(f[0][0], id, name)
		}
		switch f[0][0] {
		case '+':
			if _, dup := t.names[k][id]; !dup {
				t.order[k] = append(t.order[k], id)
			}
			t.names[k][id] = name
		case '-':
			if _, ok := t.names[k][id]; ok {
				delete(t.names[k], id)
				for i, v := range t.order[k] {
					if v == id {
						t.order[k] = append(t.order[k][:i], t.order[k][i+1:]...)
						break
					}
				}
			}
		}
	}
	// A line past the buffer ends Scan with an error; whatever came before
	// counts, and the rest of the stream is drained to its EOF.
	if sc.Err() != nil {
		_, _ = io.Copy(io.Discard, in)
	}
	return t
}

// exec takes note of "+x ID SANDBOX" (a command started) and "-x ID" (it
// ended).
func (t *toldSet) exec(f []string) {
	id := f[1]
	if !names.Valid(id) && !isEngineID(id) {
		return
	}
	i := slices.IndexFunc(t.execs, func(x toldExec) bool { return x.id == id })
	switch {
	case f[0][0] == '-' && i >= 0:
		t.execs = slices.Delete(t.execs, i, i+1)
	case f[0][0] == '+' && i < 0 && len(f) > 2 && names.Valid(f[2]) && len(t.execs) < ledger.MaxFateItems:
		t.execs = append(t.execs, toldExec{id, f[2]})
	}
}

// callTimeout is RIGHTSIZE_WATCHDOG_CALL_TIMEOUT as the script reads it.
func callTimeout() time.Duration {
	if n, err := strconv.Atoi(os.Getenv("RIGHTSIZE_WATCHDOG_CALL_TIMEOUT")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 120 * time.Second
}

// settle is RIGHTSIZE_WATCHDOG_SETTLE as the script reads it: seconds,
// default 2, 0 for none.
func settle() time.Duration {
	v := os.Getenv("RIGHTSIZE_WATCHDOG_SETTLE")
	if v == "" {
		return 2 * time.Second
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 2 * time.Second
	}
	return time.Duration(f * float64(time.Second))
}
