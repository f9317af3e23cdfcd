//go:build linux

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// What the fault proxy does to one request.
type faultKind int

const (
	faultNone    faultKind = iota
	faultLatency           // answered late
	faultError             // a 500, never forwarded
	faultReset             // the connection dropped before any answer
	faultHang              // never answered, until the client gives up
	faultLost              // done by the engine, its answer dropped
)

var faultNames = [...]string{"", "latency", "500", "reset", "hang", "lost answer"}

type fault struct {
	kind faultKind
	d    time.Duration
}

func (f fault) String() string {
	if f.kind == faultLatency || f.kind == faultHang {
		return fmt.Sprintf("%s %s", faultNames[f.kind], f.d.Round(time.Millisecond))
	}
	return faultNames[f.kind]
}

// faults is the fault plan of a run: windows of one kind of fault at a
// time, each request in a window hit with some probability, calm between
// them, and the engine restarted now and then. The seed fixes the windows
// and the restarts; which request a fault meets is the interleaving's.
type faults struct {
	seed int64
	done chan struct{}

	mu     sync.Mutex
	on     faultKind
	prob   float64
	r      *rand.Rand
	count  map[faultKind]int
	events []string
	// restartEvery: an engine restart after about this many deaths.
	restartEvery int
	restart      func(ctx context.Context, h *harness) error
	// outage, when set, makes the engine unreachable for d: each window
	// is one (a Kubernetes API server has no HTTP the proxy can see).
	outage  func(ctx context.Context, d time.Duration)
	outages int
}

func newFaults(seed int64) *faults {
	return &faults{seed: seed, done: make(chan struct{}), r: rand.New(rand.NewPCG(uint64(seed), faultStream+1)), count: map[faultKind]int{}}
}

// decide is what happens to req now. A nil faults does nothing.
func (f *faults) decide(req *http.Request) fault {
	if f == nil {
		return fault{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.on == faultNone || strings.HasSuffix(req.URL.Path, "/events") || f.r.Float64() >= f.prob {
		return fault{}
	}
	ft := fault{kind: f.on}
	switch f.on {
	case faultLatency:
		ft.d = time.Duration(50+f.r.IntN(700)) * time.Millisecond
	case faultHang:
		ft.d = time.Duration(5+f.r.IntN(40)) * time.Second
	}
	f.count[ft.kind]++
	return ft
}

// run drives the windows until ctx ends: after a calm of 2–6 s, a window
// of 0.5–3 s of one kind; an engine restart after every restartEvery
// deaths or so.
func (f *faults) run(ctx context.Context, h *harness) {
	r := rand.New(rand.NewPCG(uint64(f.seed), faultStream))
	nextRestart := f.restartEvery/2 + r.IntN(max(f.restartEvery, 1))
	for {
		calm := time.Duration(2000+r.IntN(4000)) * time.Millisecond
		kind := faultKind(1 + r.IntN(5))
		window := time.Duration(500+r.IntN(2500)) * time.Millisecond
		prob := 0.1 + r.Float64()*0.4
		select {
		case <-ctx.Done():
			return
		case <-time.After(calm):
		}
		if f.restart != nil && f.restartEvery > 0 && h.deaths() >= nextRestart {
			nextRestart += f.restartEvery/2 + r.IntN(f.restartEvery)
			f.note(h, "engine restart")
			if err := f.restart(ctx, h); err != nil {
				h.violate(nil, "the engine did not come back after the harness restarted it: "+err.Error())
			}
			continue
		}
		if f.outage != nil {
			f.note(h, fmt.Sprintf("API server unreachable for %s", window))
			f.outage(ctx, window)
			f.mu.Lock()
			f.outages++
			f.mu.Unlock()
			continue
		}
		f.mu.Lock()
		f.on, f.prob = kind, prob
		f.mu.Unlock()
		f.note(h, fmt.Sprintf("%s on %.0f%% of requests for %s", faultNames[kind], prob*100, window))
		select {
		case <-ctx.Done():
		case <-time.After(window):
		}
		f.mu.Lock()
		f.on = faultNone
		f.mu.Unlock()
	}
}

func (f *faults) note(h *harness, what string) {
	f.mu.Lock()
	f.events = append(f.events, fmt.Sprintf("%.3fs %s", time.Since(h.start).Seconds(), what))
	f.mu.Unlock()
	if *verbose {
		fmt.Printf("chaos: fault: %s\n", what)
	}
}

// stop ends every fault: hung requests are let go.
func (f *faults) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = faultNone
	select {
	case <-f.done:
	default:
		close(f.done)
	}
}

func (f *faults) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	for k := faultLatency; k <= faultLost; k++ {
		parts = append(parts, fmt.Sprintf("%s %d", faultNames[k], f.count[k]))
	}
	restarts := 0
	for _, e := range f.events {
		if strings.HasSuffix(e, "engine restart") {
			restarts++
		}
	}
	if f.outage != nil {
		return fmt.Sprintf("API server outages: %d", f.outages)
	}
	return fmt.Sprintf("requests hit: %s; engine restarts: %d", strings.Join(parts, ", "), restarts)
}

// restartDockerd stops the local dockerd (its pid file) and starts it
// again the way scripts/engine.sh does, waiting until it answers. The
// caller holds the engine lock: this disrupts everyone on the engine.
func restartDockerd(ctx context.Context, h *harness) error {
	b, err := os.ReadFile("/var/run/docker.pid")
	if err != nil {
		return fmt.Errorf("dockerd's pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("dockerd's pid file holds %q", b)
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		time.Sleep(time.Second)
	}
	return ensureEngine(ctx, h)
}

// ensureEngine starts the engine with scripts/engine.sh when none
// answers: the harness never leaves the machine without its dockerd.
func ensureEngine(ctx context.Context, h *harness) error {
	if exec.CommandContext(ctx, "docker", "info").Run() == nil {
		return nil
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	start := func() error {
		cmd := exec.CommandContext(ctx, "bash", "scripts/engine.sh")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("scripts/engine.sh: %v\n%s", err, out)
		}
		return nil
	}
	err = start()
	if err == nil || !networkStoreBroken() {
		return err
	}
	// dockerd 20.10, stopped while networks were being removed, can
	// leave a network in its store that it then panics on at every start
	// (libnetwork's reservePools): the machine is left without an engine.
	// The store is moved aside (every network goes; containers stay).
	aside := networkStore + ".broken-" + strconv.FormatInt(time.Now().Unix(), 10)
	if rerr := os.Rename(networkStore, aside); rerr != nil {
		return fmt.Errorf("%w; and its network store could not be moved aside: %v", err, rerr)
	}
	if h != nil {
		h.note("dockerd panicked on its network store after a restart: the store was moved aside to " + aside)
	}
	fmt.Fprintf(os.Stderr, "chaos: dockerd panicked on its network store after a restart; moved it aside to %s\n", aside)
	return start()
}

// networkStore is dockerd's store of networks.
const networkStore = "/var/lib/docker/network/files/local-kv.db"

// networkStoreBroken reports whether dockerd's last start panicked on its
// network store, as its log (scripts/engine.sh's) shows.
func networkStoreBroken() bool {
	log := os.Getenv("RIGHTSIZE_DOCKERD_LOG")
	if log == "" {
		log = "/var/log/rightsize-dockerd.log"
	}
	f, err := os.Open(log)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > 64<<10 {
		_, _ = f.Seek(-64<<10, 2)
	}
	b := make([]byte, 64<<10)
	n, _ := f.Read(b)
	tail := string(b[:n])
	i := strings.LastIndex(tail, "Starting up")
	return i >= 0 && strings.Contains(tail[i:], "libnetwork.(*controller).reservePools")
}
