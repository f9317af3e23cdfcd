//go:build linux

package owner_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/e2e/chaos/internal/plan"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The plan of this process, read once in TestMain.
var (
	me    plan.Owner
	given bool
	out   *os.File
	outMu sync.Mutex
)

// emit reports one event to the harness. Each line is one write to a
// pipe, shorter than PIPE_BUF, so it lands whole before whatever the
// owner does next.
func emit(ev string, args ...any) {
	if out == nil {
		return
	}
	var b strings.Builder
	b.WriteString(strconv.FormatInt(time.Now().UnixNano(), 10))
	b.WriteString(" ")
	b.WriteString(ev)
	for _, a := range args {
		s := strings.Map(func(r rune) rune {
			if r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, fmt.Sprint(a))
		if len(s) > 300 {
			s = s[:300]
		}
		b.WriteString(" ")
		b.WriteString(s)
	}
	b.WriteString("\n")
	outMu.Lock()
	defer outMu.Unlock()
	_, _ = out.WriteString(b.String())
}

func TestMain(m *testing.M) {
	var err error
	me, given, err = plan.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if given {
		// Its children (watchdogs, processes) must not hold the harness's
		// pipe: its end is the owner's end.
		syscall.CloseOnExec(plan.EventsFD)
		out = os.NewFile(plan.EventsFD, "events")
		emit(plan.EvStart, os.Getpid())
	}
	if given && me.Main {
		var opts []sandboxtest.Option
		if me.GuardAll {
			opts = append(opts, sandboxtest.GuardAll())
		}
		sandboxtest.Main(m, opts...)
		return
	}
	code := m.Run()
	if given {
		emit(plan.EvDying, "end", code)
	}
	os.Exit(code)
}

// tb is the test as the owner's steps see it: a failure of a step is an
// event and ends that step's goroutine, never the test.
type tb struct {
	*testing.T
	step int
}

func (w tb) fail(s string) { emit(plan.EvFail, w.step, s) }
func (w tb) Fatalf(f string, a ...any) {
	w.fail(fmt.Sprintf(f, a...))
	runtime.Goexit()
}
func (w tb) Fatal(a ...any)              { w.fail(fmt.Sprint(a...)); runtime.Goexit() }
func (w tb) FailNow()                    { w.fail("FailNow"); runtime.Goexit() }
func (w tb) Errorf(f string, a ...any)   { w.fail(fmt.Sprintf(f, a...)) }
func (w tb) Error(a ...any)              { w.fail(fmt.Sprint(a...)) }
func (w tb) Skipf(f string, a ...any)    { w.fail("skip: " + fmt.Sprintf(f, a...)); runtime.Goexit() }
func (w tb) Skip(a ...any)               { w.fail("skip: " + fmt.Sprint(a...)); runtime.Goexit() }
func (w tb) SkipNow()                    { w.fail("SkipNow"); runtime.Goexit() }
func (w tb) Fail()                       { w.fail("Fail") }
func (w tb) Logf(string, ...any)         {}
func (w tb) Log(...any)                  {}
func (w tb) Helper()                     {}
func (w tb) Deadline() (time.Time, bool) { return w.T.Deadline() }

// owned is what the steps made, by step index.
type owned struct {
	mu    sync.Mutex
	guard map[int]*sandboxtest.Guard
	net   map[int]*sandboxtest.Network
	proc  map[int]*sandboxtest.Process
	run   string
}

func TestOwner(t *testing.T) {
	if !given {
		t.Skip(plan.EnvOwner + " is not set: this test is the chaos harness's owner (go run ./e2e/chaos)")
	}
	o := &owned{guard: map[int]*sandboxtest.Guard{}, net: map[int]*sandboxtest.Network{}, proc: map[int]*sandboxtest.Process{}}
	// The steps a clean end waits for: every one but the commands, which
	// run until their sandbox stops.
	var async sync.WaitGroup
	for i := 0; i <= len(me.Steps); i++ {
		op := "idle"
		if i < len(me.Steps) {
			op = me.Steps[i].Op
		}
		emit(plan.EvBegin, i, op)
		if i == me.AtStep {
			die(t)
		}
		if i == len(me.Steps) {
			break
		}
		s := me.Steps[i]
		done := make(chan struct{})
		if s.Op != plan.Exec {
			async.Add(1)
		}
		go func() {
			if s.Op != plan.Exec {
				defer async.Done()
			}
			defer close(done)
			o.step(t, i, s)
		}()
		// A command runs until its owner dies, or its sandbox stops: it
		// never holds up the steps after it.
		if !s.Async && s.Op != plan.Exec {
			<-done
		}
	}
	if me.Death == plan.Clean {
		async.Wait()
		if me.Main {
			emit(plan.EvDying, "end")
		}
		return
	}
	select {} // until the harness's signal or -test.timeout
}

// die is the plan's death at its step: those the owner inflicts on
// itself happen here; the harness's own (kill, both, freeze) and the
// timeout come from outside.
func die(t *testing.T) {
	switch me.Death {
	case plan.SelfKill:
		time.AfterFunc(time.Duration(me.DelayMicros)*time.Microsecond, func() {
			emit(plan.EvDying, me.Death)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		})
	case plan.Panic:
		emit(plan.EvDying, me.Death)
		panic("chaos owner: the test panics")
	case plan.GoPanic:
		emit(plan.EvDying, me.Death)
		go func() { panic("chaos owner: a goroutine panics") }()
		select {}
	case plan.Exit:
		emit(plan.EvDying, me.Death)
		os.Exit(1)
	}
	_ = t
}

func (o *owned) step(t *testing.T, i int, s plan.Step) {
	w := tb{T: t, step: i}
	ctx := context.Background()
	switch s.Op {
	case plan.Sandbox:
		spec := sandboxtest.Spec{Image: me.Image, Cmd: sandboxCmd()}
		if n := o.network(s.Ref); n != nil {
			spec.Networks = []*sandboxtest.Network{n}
		}
		g := sandboxtest.Start(w, spec)
		o.put(i, g, nil, nil)
		o.learnRun(g.Name())
		emit(plan.EvDone, i, s.Op, g.Name())
	case plan.Network:
		n := sandboxtest.NewNetwork(w)
		o.put(i, nil, n, nil)
		o.learnRun("")
		emit(plan.EvDone, i, s.Op, n.Name())
	case plan.Process:
		p := sandboxtest.StartProcess(w, exec.Command("/bin/sh", "-c", "sleep 1000 & exec sleep 1000"))
		// Cleanups run last in, first out: this one says the owner ends
		// the process itself, before StartProcess's own cleanup does.
		t.Cleanup(func() { emit(plan.EvProcStop, p.Pid()) })
		o.put(i, nil, nil, p)
		emit(plan.EvDone, i, s.Op, p.Pid())
		o.learnRun("")
	case plan.KeepAlive:
		spec := sandboxtest.Spec{Image: me.Image, Cmd: sandboxCmd(), Reuse: true,
			Env: map[string]string{"RZ_CHAOS_KA": me.KeepAliveTag + "-" + strconv.Itoa(s.Ref)}}
		g := sandboxtest.Start(w, spec)
		emit(plan.EvAdopted, g.Name())
		o.put(i, g, nil, nil)
		emit(plan.EvDone, i, s.Op, g.Name())
	case plan.Exec:
		g := o.sandbox(s.Ref)
		if g == nil {
			emit(plan.EvDone, i, s.Op, "-")
			return
		}
		emit(plan.EvDone, i, s.Op, g.Name())
		res, err := g.Exec(ctx, []string{"sleep", "1000"})
		emit("exec-ended", i, g.Name(), res.Ending, err)
	case plan.GuardAll:
		c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
			ContainerRequest: testcontainers.ContainerRequest{Image: me.Image, Cmd: sandboxCmd(),
				Labels: map[string]string{plan.LabelHarness: me.Harness, plan.LabelOwner: strconv.Itoa(me.Index)}},
			Started: true,
		})
		if err != nil {
			w.Fatalf("guardall create: %v", err)
		}
		t.Cleanup(func() { _ = c.Terminate(context.Background()) })
		name, _ := c.Name(ctx)
		emit(plan.EvDone, i, s.Op, strings.TrimPrefix(name, "/"))
	case plan.Stop:
		o.stop(w, i, s.Ref)
	case plan.Pause:
		time.Sleep(time.Duration(s.Micros) * time.Microsecond)
		emit(plan.EvDone, i, s.Op, "-")
	default:
		w.Fatalf("no op %q", s.Op)
	}
}

func (o *owned) stop(w tb, i, ref int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o.mu.Lock()
	g, n, p := o.guard[ref], o.net[ref], o.proc[ref]
	o.mu.Unlock()
	var err error
	what := "-"
	switch {
	case g != nil:
		what = g.Name()
		err = g.Stop(ctx)
	case n != nil:
		what = n.Name()
		err = n.Remove(ctx)
	case p != nil:
		what = strconv.Itoa(p.Pid())
		emit(plan.EvProcStop, p.Pid())
		err = p.Stop(ctx)
	}
	if err != nil {
		w.fail(fmt.Sprintf("stop %s: %v", what, err))
	}
	emit(plan.EvDone, i, plan.Stop, what)
}

func (o *owned) put(i int, g *sandboxtest.Guard, n *sandboxtest.Network, p *sandboxtest.Process) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if g != nil {
		o.guard[i] = g
	}
	if n != nil {
		o.net[i] = n
	}
	if p != nil {
		o.proc[i] = p
	}
}

func (o *owned) network(ref int) *sandboxtest.Network {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.net[ref]
}

func (o *owned) sandbox(ref int) *sandboxtest.Guard {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.guard[ref]
}

// learnRun reports the run id once: from a sandbox's name (rz-<run>-<n>),
// else from the ledger (the record whose pid is this process's).
func (o *owned) learnRun(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.run != "" {
		return
	}
	if rest, ok := strings.CutPrefix(name, "rz-"); ok && !strings.HasPrefix(rest, "reuse-") {
		if id, _, ok := strings.Cut(rest, "-"); ok && ledger.ValidRunID(id) {
			o.run = id
		}
	}
	if o.run == "" {
		cache, err := ledger.Dir()
		if err != nil {
			return
		}
		if s, err := ledger.ScanRuns(cache); err == nil {
			_ = s.Each(func(rf ledger.RunFiles) error {
				if rf.RecordErr == nil && rf.Record.PID == os.Getpid() {
					o.run = rf.ID
				}
				return nil
			})
		}
	}
	if o.run != "" {
		emit(plan.EvRun, o.run)
	}
}

// sandboxCmd is every sandbox's command: one that ends at SIGTERM, so
// that a stop is quick.
func sandboxCmd() []string {
	if me.Backend == "memory" {
		return nil
	}
	return []string{"/server"}
}
