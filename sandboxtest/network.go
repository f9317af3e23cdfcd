package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Network is a network sandboxes can join (Spec.Networks), removed when the
// test that made it ends.
type Network struct {
	o    owner
	name string
	s    *reaper.Session
	// origin is what made it (origin.go).
	origin origin.Origin

	// lazy creates a suite's network at its first use; nil for the others.
	lazy *lazy

	mu      sync.Mutex
	removed bool
}

// NewNetwork creates a network named rz-net-<8 hex> for the test. Its
// removal is registered with tb.Cleanup first; since cleanups run last in,
// first out, sandboxes started afterwards are stopped before it goes.
func NewNetwork(tb testing.TB) *Network {
	tb.Helper()
	og := origin.Of(tb)
	n, note, err := newNetwork(tbOwner{tb}, og)
	if note != "" {
		tb.Log(note)
	}
	if err != nil {
		tb.Fatalf("sandboxtest: network (%s): %v", og, err)
	}
	return n
}

func newNetwork(o owner, og origin.Origin) (*Network, string, error) {
	n := &Network{o: o, origin: og}
	o.addCleanup(n.cleanup)
	note, err := n.create(o.context())
	return n, note, err
}

func (n *Network) create(ctx context.Context) (string, error) {
	s, err := getSession(ctx)
	if err != nil {
		return "", err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	n.s, n.name = s, names.NetworkPrefix+hex.EncodeToString(b[:])
	ctx = origin.NewContext(ctx, n.origin)
	note, err := s.Create(ctx, networkKind, n.name, func(ctx context.Context) (string, error) {
		return s.Driver().CreateNetwork(ctx, n.name, s.RunID())
	})
	return watchdogNote(s, note), err
}

// Name is the network's name; a suite's network is created here when it
// was not yet ("" when it cannot be).
func (n *Network) Name() string {
	if n.lazy.do() != nil {
		return ""
	}
	return n.name
}

// Remove removes the network, and its ledger line once it is gone. It fails
// while sandboxes are still attached. Calling it again after success does
// nothing.
func (n *Network) Remove(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.removed || n.s == nil || n.name == "" {
		n.removed = true
		return nil
	}
	if err := n.s.Release(ctx, networkKind, []string{n.name})[0]; err != nil {
		return err
	}
	n.removed = true
	return nil
}

func (n *Network) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := n.Remove(ctx); err != nil {
		n.o.errorf("sandboxtest: %v", err)
	}
}
