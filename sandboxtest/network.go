package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Network is a network sandboxes can join (Spec.Networks), removed when the
// test that made it ends.
type Network struct{ obj runObject }

// NewNetwork creates a network named rz-net-<8 hex> for the test. Its
// removal is registered with tb.Cleanup first; since cleanups run last in,
// first out, sandboxes started afterwards are stopped before it goes.
func NewNetwork(tb testing.TB) *Network {
	tb.Helper()
	n := &Network{obj: networkObject(tbOwner{tb}, origin.Of(tb))}
	n.obj.make(tb)
	return n
}

// NewNetwork returns a network shared by the package's tests, created when
// a sandbox that joins it first starts (or at its Name); the suite's
// sandboxes can join it.
func (s *Suite) NewNetwork() *Network {
	n := &Network{obj: networkObject(s, s.origin())}
	n.obj.makeLazily(s)
	return n
}

func networkObject(o owner, og origin.Origin) runObject {
	return runObject{kind: networkKind, prefix: names.NetworkPrefix, o: o, origin: og,
		create: func(ctx context.Context, s *reaper.Session, name string) (string, error) {
			return s.Driver().CreateNetwork(ctx, name, s.RunID())
		}}
}

// Name is the network's name; a suite's network is created here when it
// was not yet ("" when it cannot be).
func (n *Network) Name() string { return n.obj.Name() }

// Remove removes the network, and its ledger line once it is gone. It fails
// while sandboxes are still attached. Calling it again after success does
// nothing.
func (n *Network) Remove(ctx context.Context) error { return n.obj.Remove(ctx) }

// runObject is what a Network, a Volume and an Image are: an object of
// the run that sandboxes use, named here (prefix and 8 hex digits), created through the
// session (in the ledger before the engine makes it, told to the
// watchdog), and removed when the test, or the suite, that made it ends.
type runObject struct {
	kind   names.Kind
	prefix string
	create func(ctx context.Context, s *reaper.Session, name string) (id string, err error)
	o      owner
	// origin is what made it (origin.go).
	origin origin.Origin

	name string
	s    *reaper.Session
	// lazy creates a suite's object at its first use; nil for the others.
	lazy *lazy

	mu      sync.Mutex
	removed bool
}

// make creates the object for test tb, its removal registered first; a
// failure fails the test.
func (r *runObject) make(tb testing.TB) {
	tb.Helper()
	r.o.addCleanup(r.cleanup)
	note, err := r.createNow(r.o.context())
	if note != "" {
		tb.Log(note)
	}
	if err != nil {
		tb.Fatalf("sandboxtest: %s (%s): %v", r.kind, r.origin, err)
	}
}

// makeLazily has a suite's object created at its first use.
func (r *runObject) makeLazily(s *Suite) {
	r.lazy = &lazy{start: func() error {
		s.addCleanup(r.cleanup)
		note, err := r.createNow(s.context())
		if note != "" {
			s.Logf("%s", note)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", r.kind, err)
		}
		return nil
	}}
}

func (r *runObject) createNow(ctx context.Context) (string, error) {
	s, err := getSession(ctx)
	if err != nil {
		return "", err
	}
	switch r.kind {
	case names.VolumeKind:
		if _, ok := s.Driver().(backend.VolumeCreator); !ok {
			return "", fmt.Errorf("the %s backend has no named volumes", s.Driver().Name())
		}
	case names.ImageKind:
		if _, ok := s.Driver().(backend.ImageBuilder); !ok {
			return "", fmt.Errorf("the %s backend builds no images", s.Driver().Name())
		}
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	r.s, r.name = s, r.prefix+hex.EncodeToString(b[:])
	ctx = origin.NewContext(ctx, r.origin)
	note, err := s.Create(ctx, r.kind, r.name, func(ctx context.Context) (string, error) {
		return r.create(ctx, s, r.name)
	})
	return watchdogNote(s, note), err
}

// Name is the object's name; a suite's is created here when it was not
// yet ("" when it cannot be).
func (r *runObject) Name() string {
	if r.lazy.do() != nil {
		return ""
	}
	return r.name
}

// Remove removes the object, and its ledger line once it is gone. Calling
// it again after success does nothing.
func (r *runObject) Remove(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removed || r.s == nil || r.name == "" {
		r.removed = true
		return nil
	}
	if err := r.s.Release(ctx, r.kind, []string{r.name})[0]; err != nil {
		return err
	}
	r.removed = true
	return nil
}

// isRemoved reports whether Remove removed it.
func (r *runObject) isRemoved() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.removed && r.name != ""
}

func (r *runObject) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := r.Remove(ctx); err != nil {
		r.o.errorf("sandboxtest: %v", err)
	}
}
