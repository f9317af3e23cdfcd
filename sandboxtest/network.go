package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Network is a network sandboxes can join (Spec.Networks), removed when the
// test that made it ends.
type Network struct {
	o    owner
	name string
	s    *session

	mu      sync.Mutex
	removed bool
}

// NewNetwork creates a network named rz-net-<8 hex> for the test. Its
// removal is registered with tb.Cleanup first; since cleanups run last in,
// first out, sandboxes started afterwards are stopped before it goes.
func NewNetwork(tb testing.TB) *Network {
	tb.Helper()
	return newNetwork(tbOwner{tb})
}

func newNetwork(o owner) *Network {
	o.Helper()
	n := &Network{o: o}
	o.Cleanup(n.cleanup)
	if err := n.create(o.context()); err != nil {
		o.Fatalf("sandboxtest: network: %v", err)
	}
	return n
}

func (n *Network) create(ctx context.Context) error {
	s, err := getSession(ctx)
	if err != nil {
		return err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	n.s, n.name = s, "rz-net-"+hex.EncodeToString(b[:])
	// The watchdog before the first ledger write, as in Guard.start.
	if _, err := s.ensureWatchdog(); err != nil {
		n.o.Logf("sandboxtest: no watchdog for this process (%v)", err)
	}
	if s.run != nil {
		if err := s.run.AddNetwork(n.name); err != nil {
			return err
		}
	}
	if err := s.drv.CreateNetwork(ctx, n.name, s.runLabels()); err != nil {
		cerr := fmt.Errorf("create %s: %w", n.name, err)
		if ctx.Err() != nil {
			time.Sleep(lateCreateSettle) // as for a sandbox: the engine may finish it
		}
		fctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if ferr := s.removeAndForget(fctx, networkKind, []string{n.name})[0]; ferr != nil {
			cerr = fmt.Errorf("%w; and %v", cerr, ferr)
		}
		return cerr
	}
	return nil
}

// Name is the network's name.
func (n *Network) Name() string { return n.name }

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
	if err := n.s.removeAndForget(ctx, networkKind, []string{n.name})[0]; err != nil {
		return err
	}
	n.removed = true
	return nil
}

func (n *Network) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := n.Remove(ctx); err != nil {
		n.o.Errorf("sandboxtest: %v", err)
	}
}
