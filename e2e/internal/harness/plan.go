//go:build linux

package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/ledger"
)

// EnvPlan carries an owner's Plan, as JSON, to the re-executed process.
const EnvPlan = "RZ_E2E_PLAN"

// What an owner does once its sandboxes are up (Plan.Then).
const (
	// Block until stdin closes, then end the test normally: every
	// t.Cleanup runs.
	Block = "block"
	// Panic in the test's goroutine: testing runs the test's cleanups, then
	// the binary exits 2.
	Panic = "panic"
	// GoPanic panics in a goroutine of its own: no cleanup runs.
	GoPanic = "gopanic"
	// Exit1 calls os.Exit(1) in the test: no cleanup runs.
	Exit1 = "exit1"
	// LogFatal calls log.Fatal in the test: os.Exit(1), no cleanup.
	LogFatal = "logfatal"
	// Alloc allocates and touches memory until the kernel kills the
	// process (the OOM row), or AllocMax is reached.
	Alloc = "alloc"
	// Loop starts and stops sandboxes (and now and then a network) in
	// subtests, forever: the random-kill row kills it anywhere in that loop.
	Loop = "loop"
	// Churn is Loop until stdin closes, then a normal end.
	Churn = "churn"
	// Sweep makes the process a sweeper: no sandbox of its own, Rounds
	// calls of reaper.Sweep through its own docker driver, each reported.
	Sweep = "sweep"
)

// Plan is what an owner process does.
type Plan struct {
	// Image of every sandbox (the busybox test image, on the engine the
	// owner uses).
	Image string `json:"image"`
	// Cmd of every sandbox; empty means /server, which exits on SIGTERM so
	// a clean stop is quick.
	Cmd []string `json:"cmd,omitempty"`
	// Networks made first, with sandboxtest.NewNetwork; the sandboxes join
	// all of them (the first Members sandboxes only, when Members > 0).
	Networks int `json:"networks,omitempty"`
	Members  int `json:"members,omitempty"`
	// Containers started with sandboxtest.Start, one after another.
	Containers int `json:"containers,omitempty"`
	// Processes: local process trees started with sandboxtest.StartProcess
	// after the containers, each `sh -c 'sleep 1000 & sleep 1000'` (a
	// command and a child of it in its group); the owner says their pids
	// and marks.
	Processes int `json:"processes,omitempty"`
	// EscapeProcess adds to each tree a `setsid sleep 1001`: a process of
	// the run that left its group and session, which rightsize reports as
	// escaped and never signals.
	EscapeProcess bool `json:"escapeProcess,omitempty"`
	// LostMarks starts, after the other processes, three commands whose
	// processes lose the mark (see LostMarkCommands); the owner says
	// their ids under "lost.<kind>". With EscapeProcess a fourth adds a
	// child without the mark that leaves its group and session.
	LostMarks bool `json:"lostMarks,omitempty"`
	// Then is what to do next: Block, Panic, … (Block when empty).
	Then string `json:"then,omitempty"`
	// CgroupProcs is a cgroup.procs file the process writes its pid to
	// before anything else, so that everything it spawns is in that cgroup
	// too (the OOM row).
	CgroupProcs string `json:"cgroupProcs,omitempty"`
	// AllocMax bounds Alloc, so that a cgroup that fails to limit does not
	// take the machine down (bytes; 0 means 3 GiB).
	AllocMax int64 `json:"allocMax,omitempty"`
	// Seed makes Loop and Churn choices repeatable.
	Seed int64 `json:"seed,omitempty"`

	// Rounds of a Sweep (1 when 0).
	Rounds int `json:"rounds,omitempty"`
	// WaitGo: a Sweep opens its driver, says "waiting=go" and reads a line
	// from stdin before sweeping (the unreachable-engine row breaks the
	// engine in between); any other owner does the same once it has its
	// run, before its first network or sandbox (so the parent can watch
	// the ledger from the first write on).
	WaitGo bool `json:"waitGo,omitempty"`
	// DeadRunPerRound: before each round, a Sweep writes a dead run (this
	// process's pid with another start, listing a container that does not
	// exist), so that every round has something to reap.
	DeadRunPerRound bool `json:"deadRunPerRound,omitempty"`
	// PauseMS: a Sweep sleeps a random 0 to PauseMS milliseconds between
	// rounds, so that its rounds meet live owners at every step of theirs.
	PauseMS int `json:"pauseMs,omitempty"`
}

// PlanFromEnv reads the plan of this process; false when there is none
// (the process is not an owner).
func PlanFromEnv() (Plan, bool, error) {
	v, ok := os.LookupEnv(EnvPlan)
	if !ok || v == "" {
		return Plan{}, false, nil
	}
	var p Plan
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return Plan{}, true, fmt.Errorf("%s: %w", EnvPlan, err)
	}
	return p, true, nil
}

// Env is the plan as an environment entry.
func (p Plan) Env() string {
	b, _ := json.Marshal(p) // strings, numbers and bools only
	return EnvPlan + "=" + string(b)
}

// OwnerEnv is the environment of an owner process: base without any
// RIGHTSIZE_ variable, TESTCONTAINERS_HOST_OVERRIDE or earlier plan, and
// without the keys that extra sets; then cache as RIGHTSIZE_CACHE_DIR,
// Ryuk disabled, the plan, and extra.
func OwnerEnv(base []string, cache string, p Plan, extra ...string) []string {
	env := envlist.Without(base, func(k string) bool {
		return strings.HasPrefix(k, "RIGHTSIZE_") || strings.HasPrefix(k, "RZ_") ||
			k == "TESTCONTAINERS_HOST_OVERRIDE" || k == "TESTCONTAINERS_RYUK_DISABLED"
	})
	env = append(env, ledger.EnvCacheDir+"="+cache, "TESTCONTAINERS_RYUK_DISABLED=true", p.Env())
	return envlist.Merge(env, extra...)
}
