//go:build linux

package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// Say reports key=value to the parent on stdout, one line: "rz:key=value".
// Newlines in value are escaped.
func Say(key, value string) {
	fmt.Fprintf(os.Stdout, "rz:%s=%s\n", key, OneLine(value))
}

// OneLine escapes newlines and carriage returns.
func OneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(s)
}

// ReportKey is the key under which Owner reports what a sweep decided about
// run id: prefix + "." + id, with an id that is not a plain word quoted (a
// hostile ledger may name runs "-rf" or "$(x)" or worse).
func ReportKey(prefix, id string) string {
	plain := id != ""
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			plain = false
			break
		}
	}
	if !plain {
		id = strings.ReplaceAll(strconv.QuoteToASCII(id), "=", `\x3d`)
	}
	return prefix + "." + id
}

// SayReport reports each run of a sweep report under ReportKey(prefix, id)
// as "decision|reason", and what it kept under prefix+".kept".
func SayReport(prefix string, rep *reaper.Report) {
	if rep == nil {
		Say(prefix+".none", "no sweep")
		return
	}
	Say(prefix+".runs", strconv.Itoa(len(rep.Runs)))
	for _, rr := range rep.Runs {
		Say(ReportKey(prefix, rr.ID), string(rr.Decision)+"|"+rr.Reason)
		var kept []string
		for _, it := range rr.Kept {
			kept = append(kept, it.String())
		}
		for _, p := range rr.Problems {
			kept = append(kept, "problem: "+p)
		}
		if len(kept) > 0 {
			Say(ReportKey(prefix+".kept", rr.ID), strings.Join(kept, "; "))
		}
		if len(rr.Rejected) > 0 {
			Say(ReportKey(prefix+".rejected", rr.ID), strconv.Itoa(len(rr.Rejected)))
		}
	}
}

var (
	stdinOnce sync.Once
	stdin     *bufio.Reader
)

func in() *bufio.Reader {
	stdinOnce.Do(func() { stdin = bufio.NewReader(os.Stdin) })
	return stdin
}

// waitGo says "waiting=go" and waits for the parent's "go" line.
func waitGo(t *testing.T) {
	Say("waiting", "go")
	if l, err := in().ReadString('\n'); err != nil || strings.TrimSpace(l) != "go" {
		t.Fatalf("want go on stdin, got %q, %v", l, err)
	}
}

// blockStdin waits until the parent closes stdin (or dies).
func blockStdin() { _, _ = io.Copy(io.Discard, in()) }

// Owner runs plan p in test t: the body of the owner process's test. It
// says pid, run, endpoint, the first-use sweep's decisions (prefix
// "sweep"), watchdog, networks, sandboxes and ready, then does p.Then.
func Owner(t *testing.T, p Plan) {
	if p.CgroupProcs != "" {
		// First of all: whatever this process spawns from now on (its
		// watchdog) starts in that cgroup too, as in a CI job whose whole
		// test step runs under one memory limit.
		if err := os.WriteFile(p.CgroupProcs, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			Say("cgroup.err", err.Error())
			t.Fatalf("join cgroup %s: %v", p.CgroupProcs, err)
		}
	}
	Say("pid", strconv.Itoa(os.Getpid()))
	if p.Then == Sweep {
		sweeper(t, p)
		return
	}
	ctx := t.Context()
	info, err := sandboxtest.Session(ctx)
	if err != nil {
		Say("session.err", err.Error())
		t.Fatalf("session: %v", err)
	}
	Say("run", info.RunID)
	Say("endpoint", info.Endpoint)
	SayReport("sweep", info.Sweep)
	if p.WaitGo {
		waitGo(t)
	}

	cmd := p.Cmd
	if len(cmd) == 0 {
		cmd = []string{"/server"}
	}
	var nets []*sandboxtest.Network
	var netNames, names []string
	for range p.Networks {
		n := sandboxtest.NewNetwork(t)
		nets = append(nets, n)
		netNames = append(netNames, n.Name())
	}
	for i := range p.Containers {
		joins := nets
		if p.Members > 0 && i >= p.Members {
			joins = nil
		}
		g := sandboxtest.Start(t, sandboxtest.Spec{Image: p.Image, Cmd: cmd, Networks: joins})
		names = append(names, g.Name())
	}
	if info, err = sandboxtest.Session(ctx); err == nil {
		Say("watchdog", strconv.Itoa(info.WatchdogPID))
	}
	Say("networks", strings.Join(netNames, ","))
	Say("sandboxes", strings.Join(names, ","))
	Say("ready", "1")

	switch p.Then {
	case "", Block:
		blockStdin()
	case Panic:
		panic("e2e owner: a test panics")
	case GoPanic:
		go func() { panic("e2e owner: a goroutine of the test panics") }()
		select {}
	case Exit1:
		os.Exit(1)
	case LogFatal:
		log.Fatal("e2e owner: log.Fatal in a test")
	case Alloc:
		allocate(p.AllocMax)
		Say("alloc.done", "the allocation limit was reached without a kill")
		blockStdin()
	case Loop:
		rng := rand.New(rand.NewPCG(uint64(p.Seed), 1))
		for i := 0; ; i++ {
			Say("iter", strconv.Itoa(i))
			t.Run("iter"+strconv.Itoa(i), func(t *testing.T) { churnOnce(t, p, cmd, rng) })
		}
	case Churn:
		rng := rand.New(rand.NewPCG(uint64(p.Seed), 2))
		var done atomic.Bool
		go func() { blockStdin(); done.Store(true) }()
		n := 0
		for ; !done.Load(); n++ {
			t.Run("churn"+strconv.Itoa(n), func(t *testing.T) { churnOnce(t, p, cmd, rng) })
		}
		Say("churned", strconv.Itoa(n))
	default:
		t.Fatalf("plan: no Then %q", p.Then)
	}
}

// churnOnce starts one or two sandboxes, on a network of their own one
// time in three, and lets the subtest's cleanups stop them.
func churnOnce(t *testing.T, p Plan, cmd []string, rng *rand.Rand) {
	var nets []*sandboxtest.Network
	if rng.IntN(3) == 0 {
		nets = append(nets, sandboxtest.NewNetwork(t))
	}
	for range 1 + rng.IntN(2) {
		sandboxtest.Start(t, sandboxtest.Spec{Image: p.Image, Cmd: cmd, Networks: nets})
	}
}

// allocated keeps every chunk reachable.
var allocated [][]byte

func allocate(limit int64) {
	if limit <= 0 {
		limit = 3 << 30
	}
	Say("allocating", strconv.FormatInt(limit, 10))
	const chunk = 1 << 20
	for total := int64(0); total+chunk <= limit; total += chunk {
		b := make([]byte, chunk)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // untouched pages are never charged
		}
		allocated = append(allocated, b)
	}
}

// sweeper opens the docker driver the way the product does and sweeps the
// cache dir p.Rounds times with reaper.Sweep, reporting each round under
// "round<N>".
func sweeper(t *testing.T, p Plan) {
	ctx := context.Background()
	drv, err := docker.Open(ctx)
	if err != nil {
		// Not this process's failure: the parent judges it.
		Say("open.err", err.Error())
		blockStdin()
		return
	}
	defer drv.Close()
	Say("endpoint", drv.Endpoint())
	cache, err := ledger.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if p.WaitGo {
		waitGo(t)
	}
	rng := rand.New(rand.NewPCG(uint64(p.Seed), 3))
	for r := range max(p.Rounds, 1) {
		prefix := "round" + strconv.Itoa(r)
		if r > 0 && p.PauseMS > 0 {
			time.Sleep(time.Duration(rng.IntN(p.PauseMS+1)) * time.Millisecond)
		}
		if p.DeadRunPerRound {
			id, err := writeDeadRun(cache, drv.Endpoint())
			if err != nil {
				t.Fatal(err)
			}
			Say(prefix+".dead", id)
		}
		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
		if err != nil {
			Say(prefix+".err", err.Error())
			t.Errorf("sweep round %d: %v", r, err)
		}
		SayReport(prefix, rep)
	}
	Say("done", "1")
	blockStdin()
}

// writeDeadRun writes a run whose record names this very process with
// another start time (so it is dead: the pid was "reused") and lists a
// container that does not exist.
func writeDeadRun(cache, endpoint string) (string, error) {
	me, err := ledger.Self()
	if err != nil {
		return "", err
	}
	id, err := ledger.NewRunID()
	if err != nil {
		return "", err
	}
	rec := ledger.Record{
		PID: me.PID, StartedISO: ledger.FormatISO(me.Start), Backend: "docker",
		StartTicks: me.StartTicks + 1, BootID: me.BootID, PidNamespace: me.PidNamespace,
		Endpoint: endpoint, Writer: "go",
	}
	return id, WriteRun(cache, id, rec.Marshal(), []string{"rz-" + id + "-1"}, nil)
}
