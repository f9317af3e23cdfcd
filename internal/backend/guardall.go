package backend

import (
	"context"
	"fmt"

	"github.com/rightsize/rightsize-go/internal/origin"
)

// GuardHook is what a backend's guard of every create asks of the run it
// guards for. Admit comes before a container or network that belongs to
// no live run is created (the run id to label it with; when not "", the
// name to create it under, for a create that named nothing; and what made
// it, which test was making it as it came in, to label it with too); Created
// once the engine made it; Removed once the engine no longer has what
// Admit admitted (the client removed it, or its create failed and left
// nothing of the run's under that name), for the run to forget it. Live
// tells whether a run id that a create's labels carry names a live run of
// this process's ledger (its own run included): only such a create, or a
// keep-alive sandbox's, passes unguarded. Labels are what every create of
// run runID carries, as its driver decides (RunLabeler): asked after each
// Admit, so that a mark the run took on at its first (an engine-side
// keeper's) is on the first create too. All are called from many
// goroutines at once.
type GuardHook interface {
	Admit(ctx context.Context, k Kind, name string) (runID, useName string, o origin.Origin, err error)
	Labels(runID string) map[string]string
	Created(k Kind, name, id string)
	Removed(k Kind, name string)
	Live(runID string) bool
}

// AllGuard is a running guard of every create this process and its
// children make through the engine's API.
type AllGuard interface {
	// Note says, once, what the guard changed for this process (Ryuk
	// turned off, say); "" when nothing.
	Note() string
	// Close stops guarding and gives the process its engine back.
	Close() error
}

// AllGuardStarter starts a backend's guard of every create, its private
// files (a socket) under dir.
type AllGuardStarter func(ctx context.Context, dir string, h GuardHook) (AllGuard, error)

var allGuards = map[string]AllGuardStarter{}

// RegisterAllGuard makes backend name able to guard every create.
func RegisterAllGuard(name string, start AllGuardStarter) {
	registryMu.Lock()
	defer registryMu.Unlock()
	allGuards[name] = start
}

// StartAllGuard starts the guard of every create of the backend this
// process uses (RIGHTSIZE_BACKEND, else Docker). It must run before
// anything in the process reaches the engine: clients read where the
// engine is once.
func StartAllGuard(ctx context.Context, dir string, h GuardHook) (AllGuard, error) {
	name := Requested()
	if name == "" {
		name = Docker
	}
	registryMu.Lock()
	start := allGuards[name]
	registryMu.Unlock()
	if start == nil {
		return nil, fmt.Errorf("the %s backend cannot guard every create (only Docker's API can be proxied); guard sandboxes one by one with Start or Track", name)
	}
	return start(ctx, dir, h)
}
