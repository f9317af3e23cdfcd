//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	e2e "github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/internal/ledger"
)

// harness is one chaos run: its work folder, its owners, what it has seen
// of the backend, and the violations found.
type harness struct {
	seed  int64
	eng   *engine
	work  string // the work folder, removed at the end unless -keep
	cache string // RIGHTSIZE_CACHE_DIR of every process of the run
	tmp   string // their TMPDIR: the keep-alive use locks live there
	owner string // the owner test binary
	cli   string // the rightsize command
	env   []string
	start time.Time

	mu         sync.Mutex
	owners     []*owner
	byRun      map[string]*owner
	objects    map[string]*object // by kind/name, what the backend holds now
	removals   []removal          // by anyone but the owner itself
	pending    []removal          // their owner's death not yet known
	kaPending  []removal          // keep-alive removals, judged once their holders are dead
	sweepers   []*sweeper
	killed     map[int]time.Time // pids the harness killed that are not owners: when (a pid is used again)
	violations []violation
	notes      map[string]int // things worth saying that are not violations, counted
	known      map[string]int // violations of known defects, by class
	fates      map[string]map[string]ledger.Fate
	ended      int
	maxLife    time.Duration
	seen       struct{ created, own, reaped int }
}

// object is a sandbox or network the backend holds, as the harness knows
// it.
type object struct {
	kind, name, id, run, keepAlive string
	createdBy                      int
	at                             time.Time
}

func (o *object) String() string {
	if o.keepAlive != "" {
		return fmt.Sprintf("keep-alive %s %s", o.kind, o.name)
	}
	return fmt.Sprintf("%s %s (run %s)", o.kind, o.name, o.run)
}

// removal is one object removed by a process other than its owner.
type removal struct {
	obj      object
	by       int       // 0: not known (no request the proxy saw)
	asked    time.Time // when by asked for it
	at       time.Time
	earliest time.Time // it was killed then, before it went
	// unheard, when not nil, says whether the engine's answer to the
	// removal never reached its remover (the fault proxy dropped it, the
	// engine's connection broke, or the remover had given up the call),
	// and the fault the proxy put on it. Asked when the fates are judged,
	// at the end: the engine's event of a removal comes before its answer.
	unheard func() (bool, string)
}

// violation is one broken invariant: what, and the owner it concerns.
type violation struct {
	class string
	msg   string
	owner *owner
	extra []string
}

func newHarness(ctx context.Context, seed int64) (*harness, error) {
	eng, err := newEngine(*backendFlag, *faultsFlag, seed)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "rz-chaos-")
	if err != nil {
		return nil, err
	}
	h := &harness{seed: seed, eng: eng, work: work, cache: filepath.Join(work, "cache"), tmp: filepath.Join(work, "tmp"),
		byRun: map[string]*owner{}, objects: map[string]*object{}, killed: map[int]time.Time{}, notes: map[string]int{}, known: map[string]int{},
		fates: map[string]map[string]ledger.Fate{}, maxLife: 3 * time.Minute}
	for _, d := range []string{h.cache, h.tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	fmt.Printf("chaos: backend %s, %d deaths, seed %d%s; work folder %s\n", eng.name, *deathsFlag, seed, map[bool]string{true: ", faults on"}[*faultsFlag], work)
	if err := h.build(); err != nil {
		return nil, err
	}
	h.env = envlist.Without(os.Environ(), func(k string) bool {
		return strings.HasPrefix(k, "RIGHTSIZE_") || strings.HasPrefix(k, "RZ_") || strings.HasPrefix(k, "TESTCONTAINERS_") ||
			k == "TMPDIR" || k == "DOCKER_HOST" || k == "GOFLAGS"
	})
	// HOST_PROC names no folder: testcontainers-go's package init lists
	// every process of the machine through gopsutil (a session id that no
	// run here uses), and with hundreds of owners, watchdogs and their
	// commands alive, that list was a tenth of each owner's CPU. The
	// library reads /proc itself, never through gopsutil; its watchdogs
	// set the same.
	h.env = append(h.env, ledger.EnvCacheDir+"="+h.cache, "TMPDIR="+h.tmp, "TESTCONTAINERS_RYUK_DISABLED=true", "RIGHTSIZE_REAPER_DEBUG=1",
		"HOST_PROC=/nonexistent/rightsize-chaos-reads-proc-itself")
	if err := eng.setup(ctx, h); err != nil {
		return nil, err
	}
	h.env = append(h.env, eng.env...)
	return h, nil
}

// build makes the owner test binary and the command line, once.
func (h *harness) build() error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	// Only a Kubernetes run links the kubernetes backend into its binaries
	// (owner/kube_test.go says why).
	tags := "rightsize_nokube"
	if h.eng.name == "kubernetes" {
		tags = ""
	}
	h.owner, h.cli = *ownerBin, *cliBin
	if h.owner == "" {
		h.owner = filepath.Join(h.work, "owner.test")
		if out, err := goCmd(root, "test", "-c", "-tags", tags, "-o", h.owner, "./e2e/chaos/owner").CombinedOutput(); err != nil {
			return fmt.Errorf("building the owner: %v\n%s", err, out)
		}
	}
	if h.cli == "" {
		h.cli = filepath.Join(h.work, "rightsize")
		if out, err := goCmd(root, "build", "-tags", tags, "-o", h.cli, "./cmd/rightsize").CombinedOutput(); err != nil {
			return fmt.Errorf("building the rightsize command: %v\n%s", err, out)
		}
	}
	return nil
}

// goCmd is the go command in dir. It builds without cgo: a static binary
// starts without the dynamic loader, and the owner and the command line
// are started tens of thousands of times in a long run (each watchdog
// runs the owner's binary again): a 500-death memory run took 14% less
// time and CPU so. Nothing the owners do needs cgo; the race detector
// does, so a GOFLAGS that asks for it keeps cgo.
func goCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if !slices.Contains(strings.Fields(os.Getenv("GOFLAGS")), "-race") {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	return cmd
}

// repoRoot is the module's root, above the current folder.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/rightsize/rightsize-go\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run it from the repository (go run ./e2e/chaos): no go.mod of github.com/rightsize/rightsize-go above the current folder")
		}
		dir = parent
	}
}

func (h *harness) close() {
	h.eng.close()
	if *keepFlag {
		fmt.Printf("chaos: the work folder stays: %s\n", h.work)
		return
	}
	// After an interrupt the watchdogs of the owners cut short are still at
	// work in the folder (they would write their fates into it again):
	// they are given the backend's settle time.
	for deadline := time.Now().Add(h.eng.settle); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !slices.ContainsFunc(h.ours(), func(p libProc) bool { return p.role == "watchdog" }) {
			break
		}
	}
	// The owners' temporary folders may hold what they made read-only.
	_ = filepath.Walk(h.work, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(h.work)
}

// run runs the owners to their deaths, the sweepers beside them, then the
// end: faults off, the watchdogs waited for, one sweep, the last checks.
func (h *harness) run(ctx context.Context) error {
	h.start = time.Now()
	par := *parallel
	if par <= 0 {
		par = h.eng.parallel
	}
	bg, stopBG := context.WithCancel(ctx)
	var bgWG sync.WaitGroup
	follow := func(ctx context.Context) { h.eng.side.follow(ctx, h) }
	for _, f := range []func(context.Context){follow, h.track, h.watchProcesses} {
		bgWG.Add(1)
		go func() { defer bgWG.Done(); f(bg) }()
	}
	sweepCtx, stopSweeps := context.WithCancel(bg)
	var sweepWG sync.WaitGroup
	sweepWG.Add(1)
	go func() { defer sweepWG.Done(); h.runSweepers(sweepCtx) }()
	faultCtx, stopFaults := context.WithCancel(bg)
	var faultWG sync.WaitGroup
	if h.eng.faults != nil {
		faultWG.Add(1)
		go func() { defer faultWG.Done(); h.eng.faults.run(faultCtx, h) }()
	}

	slots := make(chan struct{}, par)
	var owners sync.WaitGroup
	kaTag := h.keepAliveTag()
	for i := range *deathsFlag {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		o := h.newOwner(generate(h.seed, i, h.eng, kaTag, h.id()))
		owners.Add(1)
		go func() {
			defer owners.Done()
			defer func() { <-slots }()
			o.live(ctx)
			h.mu.Lock()
			h.ended++
			n := h.ended
			h.mu.Unlock()
			if *verbose {
				fmt.Printf("death %d/%d: %s\n", n, *deathsFlag, o.summary())
			} else if n%max(*deathsFlag/20, 1) == 0 {
				fmt.Printf("chaos: %d/%d deaths, %d violations, %s\n", n, *deathsFlag, h.violationCount(), time.Since(h.start).Round(time.Second))
			}
		}()
	}
	owners.Wait()
	stopSweeps()
	sweepWG.Wait()
	stopFaults()
	faultWG.Wait()
	if h.eng.faults != nil {
		h.eng.faults.stop()
	}
	err := h.finish(ctx)
	stopBG()
	bgWG.Wait()
	if ctx.Err() == nil {
		h.mu.Lock()
		h.checkPending(true)
		h.mu.Unlock()
	}
	return err
}

// runSweepers runs `rightsize sweep` and `rightsize reuse prune` beside the
// owners, on the seed's schedule, some of them killed half-way.
func (h *harness) runSweepers(ctx context.Context) {
	r := rand.New(rand.NewPCG(uint64(h.seed), sweeperStream))
	for n := 0; ; n++ {
		s := nextSweep(r, h.eng.sweepGap)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(s.gapMillis) * time.Millisecond):
		}
		h.runSweep(ctx, n, s)
	}
}

// runSweep runs one sweeper to its end, or SIGKILLs it at its time.
func (h *harness) runSweep(ctx context.Context, n int, s sweep) {
	args := []string{"sweep"}
	if s.prune {
		args = []string{"reuse", "prune", "--older-than", "0s"}
	}
	cmd := exec.Command(h.cli, args...)
	cmd.Env = h.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	sw := &sweeper{n: n, what: s.String()}
	if err := cmd.Start(); err != nil {
		h.note("a sweeper could not start: " + err.Error())
		return
	}
	sw.pid, sw.start = cmd.Process.Pid, time.Now()
	h.mu.Lock()
	h.sweepers = append(h.sweepers, sw)
	h.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	if s.killAfter >= 0 {
		select {
		case err = <-done:
		case <-time.After(time.Duration(s.killAfter) * time.Microsecond):
			h.mu.Lock()
			sw.killed = time.Now()
			h.killed[sw.pid] = sw.killed
			h.mu.Unlock()
			_ = cmd.Process.Kill()
			err = <-done
		}
	} else {
		select {
		case err = <-done:
		case <-time.After(h.maxLife):
			_ = cmd.Process.Kill()
			err = <-done
			h.violate(nil, fmt.Sprintf("sweeper %d (%s, pid %d) had not ended %s after its start: killed", n, s, sw.pid, h.maxLife), lastLines(out.String(), 20)...)
		}
	}
	sw.end = time.Now()
	if sw.killed.IsZero() && err != nil {
		// A sweep that fails is said, not judged: it may have met a fault.
		h.note(fmt.Sprintf("%s exited: %v", s.what(), err))
	}
	_ = ctx
}

func (s sweep) what() string {
	if s.prune {
		return "rightsize reuse prune"
	}
	return "rightsize sweep"
}

// sweeper is one run of the command line beside the owners.
type sweeper struct {
	n                  int
	what               string
	pid                int
	start, end, killed time.Time
}

// note counts something worth saying that breaks no invariant.
func (h *harness) note(s string) {
	h.mu.Lock()
	h.notes[s]++
	h.mu.Unlock()
}

// violate records a violation and prints it with the seed and the events
// that led to it.
func (h *harness) violate(o *owner, msg string, extra ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violateLocked(o, msg, extra...)
}

func (h *harness) violateLocked(o *owner, msg string, extra ...string) {
	h.defectLocked("", o, msg, extra...)
}

// defectLocked records a violation of a known defect's class (known.go),
// or a new one ("" class): a known one is printed as such and counted
// apart, unless -strict.
func (h *harness) defectLocked(class string, o *owner, msg string, extra ...string) {
	v := violation{msg: msg, owner: o, extra: extra, class: class}
	var b strings.Builder
	if class != "" && !*strict {
		h.known[class]++
		if h.known[class] > 3 {
			return // said enough: counted
		}
		fmt.Fprintf(&b, "KNOWN DEFECT %s (seed %d, not counted; -strict counts it): %s\n  (%s)\n", class, h.seed, msg, knownDefects[class])
	} else {
		h.violations = append(h.violations, v)
		fmt.Fprintf(&b, "VIOLATION %d (seed %d): %s\n", len(h.violations), h.seed, msg)
	}
	fmt.Fprintf(&b, "  replay: go run ./e2e/chaos -backend %s -deaths %d -seed %d%s\n", h.eng.name, *deathsFlag, h.seed, map[bool]string{true: " -faults"}[*faultsFlag])
	for _, e := range extra {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	if o != nil {
		b.WriteString(o.history(h.start))
	}
	fmt.Print(b.String())
}

func (h *harness) violationCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.violations)
}

func (h *harness) deaths() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended
}

// who says what process pid was at instant at, as far as the harness
// knows: an owner, a sweeper, a watchdog it saw.
func (h *harness) whoLocked(pid int, at time.Time) string {
	for _, o := range h.owners {
		if o.pid == pid && !at.Before(o.spawnAt) && (o.exitAt.IsZero() || !at.After(o.exitAt)) {
			return fmt.Sprintf("owner #%d (run %s)", o.plan.Index, o.run)
		}
	}
	for _, s := range h.sweepers {
		if s.pid == pid && !at.Before(s.start) && (s.end.IsZero() || !at.After(s.end)) {
			return fmt.Sprintf("sweeper %d (%s)", s.n, s.what)
		}
	}
	if pid == 0 {
		return "no process the proxy saw ask for it (the engine itself, a keeper)"
	}
	if w, ok := watchdogs.get(pid); ok {
		return "the watchdog of run " + w
	}
	return "pid " + strconv.Itoa(pid) + " (not an owner or a sweeper: a watchdog, most likely)"
}

// id names this harness's run on the engine: its work folder's name.
func (h *harness) id() string { return filepath.Base(h.work) }

// report prints the run's figures.
func (h *harness) report(took time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	byDeath := map[string][]time.Duration{}
	var gone, clear []time.Duration
	nothing := 0
	for _, o := range h.owners {
		if !o.dead {
			continue
		}
		if !o.hadAny {
			nothing++
			continue
		}
		if !o.goneAt.IsZero() {
			d := o.goneAt.Sub(o.deathLB)
			byDeath[o.plan.Death] = append(byDeath[o.plan.Death], d)
			gone = append(gone, d)
		}
		if !o.clearAt.IsZero() {
			clear = append(clear, o.clearAt.Sub(o.deathLB))
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("chaos: %d deaths in %s on %d cores (load %s; the harness itself used %s of CPU); %d left nothing to reap\n", h.ended, took.Round(time.Second), runtime.NumCPU(), loadavg(), self.Round(10*time.Millisecond), nothing)
	procs := 0
	for _, o := range h.owners {
		procs += len(o.procs)
	}
	fmt.Printf("chaos: seen made: %d sandboxes and networks, %d local processes; removed by their owners %d, by a watchdog or a sweep %d\n", h.seen.created, procs, h.seen.own, h.seen.reaped)
	if h.eng.faults != nil {
		fmt.Printf("chaos: faults: %s\n", h.eng.faults.summary())
	}
	fmt.Printf("chaos: death to nothing left (sandboxes, networks, processes): %s\n", figures(gone))
	kinds := make([]string, 0, len(byDeath))
	for k := range byDeath {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Printf("chaos:   %-9s %s\n", k, figures(byDeath[k]))
	}
	fmt.Printf("chaos: death to no ledger file either: %s\n", figures(clear))
	for _, c := range slices.Sorted(maps.Keys(h.known)) {
		fmt.Printf("chaos: known defect %s seen %d times (not counted; -strict counts them): %s\n", c, h.known[c], knownDefects[c])
	}
	notes := make([]string, 0, len(h.notes))
	for n := range h.notes {
		notes = append(notes, n)
	}
	sort.Strings(notes)
	for _, n := range notes {
		fmt.Printf("chaos: note (%d×): %s\n", h.notes[n], n)
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func lastLines(s string, n int) []string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	for i := range l {
		l[i] = "| " + l[i]
	}
	return l
}

// figures is a set of durations as count, median, p99 and maximum.
func figures(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d deaths: median %s, p99 %s, max %s", len(ds),
		msOf(e2e.Median(ds)), msOf(e2e.Percentile(ds, 99)), msOf(slices.Max(ds)))
}

func msOf(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64) + " ms"
}
