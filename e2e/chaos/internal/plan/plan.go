// Package plan is what the chaos harness (e2e/chaos) and the owner test
// binary it kills (e2e/chaos/owner) share: an owner's plan, drawn from the
// run's seed, and the events the owner reports on its way.
//
// A seed fixes every plan; it cannot fix the interleaving of real
// processes, which is what the harness is there to vary.
package plan

import (
	"encoding/json"
	"fmt"
	"os"
)

// EnvOwner carries an owner's plan, as JSON, to the owner test binary.
const EnvOwner = "RZ_CHAOS_OWNER"

// EventsFD is the descriptor the owner writes its events to: a pipe the
// harness reads.
const EventsFD = 3

// Operations of a Step.
const (
	// Sandbox: sandboxtest.Start of an ordinary sandbox, joined to the
	// network of step Ref when Ref >= 0.
	Sandbox = "sandbox"
	// Network: sandboxtest.NewNetwork.
	Network = "network"
	// Process: sandboxtest.StartProcess of `sh -c 'sleep & exec sleep'`.
	Process = "process"
	// KeepAlive: sandboxtest.Start with Reuse, identity Ref (a small
	// number, so that owners adopt each other's).
	KeepAlive = "keepalive"
	// Exec: Guard.Exec of a long command in the sandbox of step Ref,
	// left running (docker).
	Exec = "exec"
	// GuardAll: a container created with plain testcontainers-go under
	// sandboxtest.GuardAll (docker).
	GuardAll = "guardall"
	// Stop: Stop the sandbox or process of step Ref.
	Stop = "stop"
	// Pause: sleep Micros.
	Pause = "pause"
)

// Step is one thing an owner does.
type Step struct {
	Op     string `json:"op"`
	Ref    int    `json:"ref"`
	Micros int    `json:"us,omitempty"`
	// Async runs the step in a goroutine of its own: it races the steps
	// after it (a stop against a create, say).
	Async bool `json:"async,omitempty"`
}

// Ways an owner dies (Owner.Death).
const (
	// Kill: the harness SIGKILLs it DelayMicros after it reports step
	// AtStep begun.
	Kill = "kill"
	// SelfKill: a timer armed at step AtStep SIGKILLs the process from
	// inside, DelayMicros later: anywhere in a create, a removal, a
	// ledger write, the first use's sweep.
	SelfKill = "selfkill"
	// Timeout: `-test.timeout` of TimeoutMillis fires.
	Timeout = "timeout"
	// Panic: the test panics at step AtStep (testing runs its cleanups).
	Panic = "panic"
	// GoPanic: a goroutine panics at step AtStep (no cleanup runs).
	GoPanic = "gopanic"
	// Exit: os.Exit(1) at step AtStep (no cleanup runs).
	Exit = "exit"
	// Clean: every step done, the test passes.
	Clean = "clean"
	// Both: the harness SIGKILLs the owner and its watchdogs at once, as a
	// CI runner killing a whole cgroup: the next sweep is the backstop.
	Both = "both"
	// Freeze: the harness SIGSTOPs it, holds it FreezeMillis, then
	// SIGKILLs it: nothing of a frozen owner may be touched.
	Freeze = "freeze"
)

// Owner is one owner process's plan.
type Owner struct {
	Index   int    `json:"index"`
	Backend string `json:"backend"`
	Image   string `json:"image,omitempty"`
	// Main: TestMain is sandboxtest.Main (with GuardAll when GuardAll is
	// set); else a plain m.Run.
	Main     bool   `json:"main,omitempty"`
	GuardAll bool   `json:"guardAll,omitempty"`
	Steps    []Step `json:"steps"`

	Death         string `json:"death"`
	AtStep        int    `json:"atStep"`
	DelayMicros   int    `json:"delayUs,omitempty"`
	TimeoutMillis int    `json:"timeoutMs,omitempty"`
	FreezeMillis  int    `json:"freezeMs,omitempty"`
	// Watchdog is RIGHTSIZE_WATCHDOG for this owner ("" leaves it unset).
	Watchdog string `json:"watchdog,omitempty"`
	// Reuse sets RIGHTSIZE_REUSE=1.
	Reuse bool `json:"reuse,omitempty"`
	// KeepAliveTag keeps this harness's keep-alive identities apart from
	// anyone else's on a shared engine.
	KeepAliveTag string `json:"kaTag,omitempty"`
	// Harness names the harness's run: the containers made with plain
	// testcontainers-go carry it (LabelHarness) and their owner's index
	// (LabelOwner), so that one that escaped GuardAll is still found.
	Harness string `json:"harness,omitempty"`
}

// The labels of a container an owner makes with plain testcontainers-go.
const (
	LabelHarness = "rz.chaos.harness"
	LabelOwner   = "rz.chaos.owner"
)

// Env is the plan as an environment entry.
func (o Owner) Env() string {
	b, _ := json.Marshal(o) // strings, numbers and bools only
	return EnvOwner + "=" + string(b)
}

// FromEnv reads this process's plan; false when there is none.
func FromEnv() (Owner, bool, error) {
	v, ok := os.LookupEnv(EnvOwner)
	if !ok || v == "" {
		return Owner{}, false, nil
	}
	var o Owner
	if err := json.Unmarshal([]byte(v), &o); err != nil {
		return Owner{}, true, fmt.Errorf("%s: %w", EnvOwner, err)
	}
	return o, true, nil
}

// Events the owner reports, one line each: "<unix ns> <event> <args…>".
const (
	EvStart    = "start"    // pid
	EvRun      = "run"      // run id, once known
	EvBegin    = "begin"    // step index, op
	EvDone     = "done"     // step index, op, name (a pid for a process)
	EvFail     = "fail"     // step index, op, error
	EvAdopted  = "ka"       // keep-alive name: held from now on
	EvProcStop = "procstop" // pid: the owner is about to end it itself
	EvDying    = "dying"    // how: the owner ends itself right after this line
)
