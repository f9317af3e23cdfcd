//go:build linux

package main

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

// engine is what differs from one backend to another: how its objects are
// seen made and removed, what is left at the end, and the owners' mix.
type engine struct {
	name        string // the -backend flag
	backendName string // RIGHTSIZE_BACKEND of the owners
	image       string
	exec        bool // Guard.Exec works
	guardAll    bool // sandboxtest.GuardAll works
	noKeepAlive bool // the backend has no keep-alive sandboxes
	// blindRemovers: the backend cannot say which process removed what
	// (Kubernetes): a removal after its owner's death has remover 0, and
	// a fate's word of who removed it stands.
	blindRemovers bool
	// untold are the kinds of object no ledger line, hence no fate, names
	// (a run's Lease): their removals are judged, not told.
	untold      []string
	timeoutMin  int // -test.timeout of a timeout death: from this many ms…
	timeoutSpan int // …to this many more
	parallel    int // owners at once
	sweepGap    int // mean ms between two sweepers
	outlive     time.Duration
	settle      time.Duration // how long the watchdogs are given at the end
	env         []string
	faults      *faults
	side        side
}

// side is a backend's own part of the harness.
type side interface {
	// setup prepares the backend (the engine's image, the journal, the
	// event stream) before the first owner.
	setup(ctx context.Context, h *harness, e *engine) error
	// follow reports every create and removal as it happens, until ctx
	// ends (h.created, h.removed).
	follow(ctx context.Context, h *harness)
	// leftovers lists what of the run's owners is still there.
	leftovers(ctx context.Context, h *harness) []leftover
	// settle waits until what follow reports has caught up with the
	// backend.
	settle(ctx context.Context, h *harness)
	// cleanup removes what the harness made beside the owners (keep-alive
	// sandboxes, images it built) once the checks are done.
	cleanup(ctx context.Context, h *harness)
	close()
}

// leftover is one thing left at the end, said as a violation.
type leftover struct {
	class string // a known defect's (known.go), or ""
	owner *owner
	msg   string
}

func newEngine(name string, faulty bool, seed int64) (*engine, error) {
	e := &engine{name: name, timeoutMin: 30, timeoutSpan: 1500, outlive: 20 * time.Second, settle: 30 * time.Second}
	switch name {
	case "memory":
		e.backendName, e.image, e.parallel, e.sweepGap = "memory", "chaos:memory", 8, 800
		e.side = &memorySide{}
		if faulty {
			return nil, fmt.Errorf("-faults: the memory backend has no engine to put a fault proxy in front of")
		}
	case "docker", "podman":
		e.backendName, e.exec, e.guardAll, e.parallel, e.sweepGap = "docker", true, true, 4, 1500
		e.timeoutMin, e.timeoutSpan = 500, 5000
		// A watchdog's engine calls may take 120 s each (its default).
		e.outlive, e.settle = 5*time.Minute, 5*time.Minute
		d := &dockerSide{podman: name == "podman"}
		e.side = d
		if faulty {
			e.faults = newFaults(seed)
			if name == "docker" {
				e.faults.restartEvery = *restartEvery
				e.faults.restart = func(ctx context.Context, h *harness) error {
					d.mu.Lock()
					d.restarts = append(d.restarts, [2]time.Time{time.Now()})
					d.restarted = true
					d.mu.Unlock()
					// Never cut short: the machine must get its engine back.
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
					err := restartDockerd(rctx, h)
					cancel()
					d.mu.Lock()
					d.restarts[len(d.restarts)-1][1] = time.Now()
					d.mu.Unlock()
					return err
				}
			}
		}
	case "kubernetes":
		// Pods take a second or more to run, on one node: fewer owners at
		// once, longer timeouts. No keep-alive sandbox (the backend has
		// none), no GuardAll (Docker's API alone).
		e.backendName, e.exec, e.noKeepAlive, e.parallel, e.sweepGap = "kubernetes", true, true, 3, 2500
		e.blindRemovers, e.untold = true, []string{"lease", "service", "configmap"}
		e.timeoutMin, e.timeoutSpan = 1000, 8000
		e.outlive, e.settle = 2*time.Minute, 2*time.Minute
		e.side = &kubeSide{}
		if faulty {
			e.faults = newFaults(seed)
		}
	default:
		return nil, fmt.Errorf("-backend %s: not one this harness runs (memory, docker, podman, kubernetes)", name)
	}
	return e, nil
}

func (e *engine) setup(ctx context.Context, h *harness) error { return e.side.setup(ctx, h, e) }
func (e *engine) leftovers(ctx context.Context, h *harness) []leftover {
	return e.side.leftovers(ctx, h)
}
func (e *engine) settleEngine(ctx context.Context, h *harness) { e.side.settle(ctx, h) }
func (e *engine) cleanup(ctx context.Context, h *harness)      { e.side.cleanup(ctx, h) }
func (e *engine) close()                                       { e.side.close() }

var execCommandContext = exec.CommandContext
