//go:build linux

package harness

import (
	"context"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/probe"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

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
// as "decision|reason", what it kept under prefix+".kept", and why it
// stopped early, if it did, under prefix+".unfinished".
func SayReport(prefix string, rep *reaper.Report) {
	if rep == nil {
		proctest.Say(prefix+".none", "no sweep")
		return
	}
	proctest.Say(prefix+".runs", strconv.Itoa(len(rep.Runs)))
	if rep.Unfinished != "" {
		proctest.Say(prefix+".unfinished", rep.Unfinished)
	}
	for _, rr := range rep.Runs {
		proctest.Say(ReportKey(prefix, rr.ID), string(rr.Decision)+"|"+rr.Reason)
		var kept []string
		for _, it := range rr.Kept {
			kept = append(kept, it.String())
		}
		for _, p := range rr.Problems {
			kept = append(kept, "problem: "+p)
		}
		if len(kept) > 0 {
			proctest.Say(ReportKey(prefix+".kept", rr.ID), strings.Join(kept, "; "))
		}
		if len(rr.Rejected) > 0 {
			proctest.Say(ReportKey(prefix+".rejected", rr.ID), strconv.Itoa(len(rr.Rejected)))
		}
	}
}

// Owner runs plan p in test t: the body of the owner process's test. It
// says pid, run, endpoint, the first-use sweep's decisions (prefix
// "sweep"), watchdog, networks, sandboxes and ready, then does p.Then.
func Owner(t *testing.T, p Plan) {
	if p.CgroupProcs != "" {
		// First of all: whatever this process spawns from now on (its
		// watchdog) starts in that cgroup too, as in a CI job whose whole
		// test step runs under one memory limit.
		if err := os.WriteFile(p.CgroupProcs, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			proctest.Say("cgroup.err", err.Error())
			t.Fatalf("join cgroup %s: %v", p.CgroupProcs, err)
		}
	}
	proctest.Say("pid", strconv.Itoa(os.Getpid()))
	if p.Then == Sweep {
		sweeper(t, p)
		return
	}
	ctx := t.Context()
	sess, err := probe.Session(ctx)
	if err != nil {
		proctest.Say("session.err", err.Error())
		t.Fatalf("session: %v", err)
	}
	proctest.Say("run", sess.RunID())
	proctest.Say("endpoint", sess.Driver().Endpoint())
	SayReport("sweep", sess.Sweep())
	if p.WaitGo {
		if err := proctest.WaitGo(); err != nil {
			t.Fatal(err)
		}
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
	var procs []string
	for range p.Processes {
		script := "sleep 1000 & sleep 1000"
		if p.EscapeProcess {
			script = "setsid sleep 1001 & " + script
		}
		pr := sandboxtest.StartProcess(t, exec.Command("/bin/sh", "-c", script))
		procs = append(procs, strconv.Itoa(pr.Pid()))
	}
	proctest.Say("processes", strings.Join(procs, ","))
	if p.LostMarks {
		startLostMarks(t, p.EscapeProcess)
	}
	if wd := sess.Watchdog(); wd != nil {
		proctest.Say("watchdog", strconv.Itoa(wd.PID))
		proctest.Say("watchdog.kind", wd.Kind)
	} else {
		proctest.Say("watchdog", "0")
	}
	proctest.Say("networks", strings.Join(netNames, ","))
	proctest.Say("sandboxes", strings.Join(names, ","))
	proctest.Say("ready", "1")

	switch p.Then {
	case "", Block:
		proctest.Block()
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
		proctest.Say("alloc.done", "the allocation limit was reached without a kill")
		proctest.Block()
	case Loop:
		rng := rand.New(rand.NewPCG(uint64(p.Seed), 1))
		for i := 0; ; i++ {
			proctest.Say("iter", strconv.Itoa(i))
			t.Run("iter"+strconv.Itoa(i), func(t *testing.T) { churnOnce(t, p, cmd, rng) })
		}
	case Churn:
		rng := rand.New(rand.NewPCG(uint64(p.Seed), 2))
		var done atomic.Bool
		go func() { proctest.Block(); done.Store(true) }()
		n := 0
		for ; !done.Load(); n++ {
			t.Run("churn"+strconv.Itoa(n), func(t *testing.T) { churnOnce(t, p, cmd, rng) })
		}
		proctest.Say("churned", strconv.Itoa(n))
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
	proctest.Say("allocating", strconv.FormatInt(limit, 10))
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
		proctest.Say("open.err", err.Error())
		proctest.Block()
		return
	}
	defer drv.Close()
	proctest.Say("endpoint", drv.Endpoint())
	cache, err := ledger.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if p.WaitGo {
		if err := proctest.WaitGo(); err != nil {
			t.Fatal(err)
		}
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
			proctest.Say(prefix+".dead", id)
		}
		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
		if err != nil {
			proctest.Say(prefix+".err", err.Error())
			t.Errorf("sweep round %d: %v", r, err)
		}
		SayReport(prefix, rep)
	}
	proctest.Say("done", "1")
	proctest.Block()
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
