// Package probe lets this module's own crash matrix and benchmarks look at
// the session package sandboxtest set up in a test binary (its run, its
// watchdog, its first sweep) without sandboxtest exporting diagnostics to
// its users.
//
// It holds one hook and nothing else; it must never change behaviour.
package probe

import (
	"context"
	"sync"

	"github.com/rightsize/rightsize-go/internal/reaper"
)

var (
	mu      sync.Mutex
	session func(context.Context) (*reaper.Session, error)
)

// SetSession is called by package sandboxtest at init.
func SetSession(f func(context.Context) (*reaper.Session, error)) {
	mu.Lock()
	session = f
	mu.Unlock()
}

// Session sets up (if needed) and returns the session of package
// sandboxtest in this process.
func Session(ctx context.Context) (*reaper.Session, error) {
	mu.Lock()
	f := session
	mu.Unlock()
	if f == nil {
		return nil, errNoSession
	}
	return f(ctx)
}

type noSession struct{}

func (noSession) Error() string { return "probe: package sandboxtest is not linked into this program" }

var errNoSession error = noSession{}
