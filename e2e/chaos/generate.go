//go:build linux

package main

import (
	"math/rand/v2"
	"strconv"

	"github.com/rightsize/rightsize-go/e2e/chaos/internal/plan"
)

// Each owner's plan comes from a stream of its own (seed, index): the
// plan of owner i is the same whatever the count, so a short replay of a
// seed runs the same first owners.
func ownerRand(seed int64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), uint64(i)+1))
}

// The sweepers' streams, apart from every owner's.
const (
	sweeperStream = 1 << 62
	faultStream   = 1<<62 + 1
)

// pick returns a key of weights at random, in proportion to its weight;
// keys are tried in the order given, so the draw is the seed's alone.
func pick(r *rand.Rand, keys []string, weights []int) string {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := r.IntN(total)
	for i, w := range weights {
		if n < w {
			return keys[i]
		}
		n -= w
	}
	return keys[len(keys)-1]
}

// delay draws a delay in microseconds, mostly short: most deaths should
// land inside an operation, some after it.
func delay(r *rand.Rand) int {
	switch r.IntN(10) {
	case 0, 1, 2, 3, 4:
		return r.IntN(2000)
	case 5, 6, 7:
		return r.IntN(20000)
	default:
		return r.IntN(300000)
	}
}

// generate is owner i's plan on backend b.
func generate(seed int64, i int, b *engine, kaTag, harness string) plan.Owner {
	r := ownerRand(seed, i)
	o := plan.Owner{Index: i, Backend: b.backendName, Image: b.image, KeepAliveTag: kaTag, Harness: harness}
	o.Main = r.IntN(10) < 3
	o.GuardAll = o.Main && b.guardAll && r.IntN(2) == 0
	o.Reuse = r.IntN(10) < 4 && !b.noKeepAlive
	switch r.IntN(10) {
	case 0, 1:
		o.Watchdog = "native"
	case 2, 3:
		o.Watchdog = "script"
		if b.backendName == "kubernetes" {
			o.Watchdog = "" // the native one, which renews the run's Lease
		}
	}
	ops := []string{plan.Sandbox, plan.Network, plan.Process, plan.KeepAlive, plan.Stop, plan.Pause}
	weights := []int{30, 15, 15, 10, 15, 10}
	if b.noKeepAlive {
		weights[3] = 0
	}
	if b.exec {
		ops, weights = append(ops, plan.Exec), append(weights, 8)
	}
	if o.GuardAll {
		ops, weights = append(ops, plan.GuardAll), append(weights, 10)
	}
	n := 1 + r.IntN(6)
	var nets, made []int
	for len(o.Steps) < n {
		s := plan.Step{Op: pick(r, ops, weights), Ref: -1, Async: r.IntN(5) == 0}
		switch s.Op {
		case plan.Sandbox:
			if len(nets) > 0 && r.IntN(2) == 0 {
				s.Ref = nets[r.IntN(len(nets))]
			}
		case plan.KeepAlive:
			s.Ref = r.IntN(3)
		case plan.Stop, plan.Exec:
			if len(made) == 0 {
				continue
			}
			s.Ref = made[r.IntN(len(made))]
		case plan.Pause:
			s.Micros = r.IntN(3000)
			s.Async = false
		}
		switch s.Op {
		case plan.Network:
			nets = append(nets, len(o.Steps))
			made = append(made, len(o.Steps))
		case plan.Sandbox, plan.Process, plan.KeepAlive:
			made = append(made, len(o.Steps))
		}
		o.Steps = append(o.Steps, s)
	}
	deaths := []string{plan.Kill, plan.SelfKill, plan.Timeout, plan.Panic, plan.GoPanic, plan.Exit, plan.Clean, plan.Both, plan.Freeze}
	dw := []int{22, 25, 7, 8, 6, 6, 12, 8, 6}
	o.Death = pick(r, deaths, dw)
	o.AtStep = r.IntN(len(o.Steps) + 1)
	o.DelayMicros = delay(r)
	switch o.Death {
	case plan.Timeout:
		o.TimeoutMillis = b.timeoutMin + r.IntN(b.timeoutSpan)
		o.AtStep = -1
	case plan.Clean:
		o.AtStep = -1
	case plan.Freeze:
		o.FreezeMillis = 100 + r.IntN(1500)
	}
	return o
}

// sweeperPlan is the sweepers' schedule: after each gap, a `rightsize
// sweep` or a `rightsize reuse prune`, SIGKILLed after killAfter (µs)
// when killAfter >= 0.
type sweep struct {
	gapMillis int
	prune     bool
	killAfter int
}

func (s sweep) String() string {
	what := "rightsize sweep"
	if s.prune {
		what = "rightsize reuse prune --older-than 0s"
	}
	if s.killAfter >= 0 {
		what += ", SIGKILLed after " + strconv.Itoa(s.killAfter) + "µs"
	}
	return what
}

func nextSweep(r *rand.Rand, meanGap int) sweep {
	s := sweep{gapMillis: r.IntN(2*meanGap + 1), prune: r.IntN(3) == 0, killAfter: -1}
	if r.IntN(4) == 0 {
		s.killAfter = delay(r) * 3
	}
	return s
}
