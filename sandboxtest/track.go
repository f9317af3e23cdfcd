package sandboxtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/origin"
)

// Track returns a testcontainers-go customizer that gives a container started
// by testcontainers.Run, or by any testcontainers-go module, what Start
// gives: a rightsize name and labels, a ledger line before it is created,
// the watchdog, ports published where this process reaches them, and its
// removal registered with tb.Cleanup. Put it last among the options, so
// nothing after it renames the container:
//
//	ctr, err := postgres.Run(ctx, "postgres:16", sandboxtest.Track(t))
//
// It needs the Docker backend. Calling Terminate on the container as well
// is harmless.
func Track(tb testing.TB) testcontainers.ContainerCustomizer {
	tb.Helper()
	t := &tracker{o: tbOwner{tb}, origin: origin.Of(tb)}
	// The first container's name is admitted here, in the test's frame, so
	// that what the first sandbox logs (the watchdog's pid) points at the
	// test's line rather than at this file.
	t.first, t.err = t.admit()
	return t
}

type tracker struct {
	o owner
	// origin is what makes its containers: the test, at its call of Track.
	origin origin.Origin
	mu     sync.Mutex
	first  *Guard // admitted by Track, not yet given to a container
	err    error
}

// admit names a container of the run and lists it, with its removal
// registered; the name's Guard has no sandbox yet.
func (t *tracker) admit() (*Guard, error) {
	if tb := t.o.testTB(); tb != nil {
		tb.Helper()
	}
	s, err := getSession(t.o.context())
	if err != nil {
		return nil, fmt.Errorf("sandboxtest.Track: %w", err)
	}
	if _, ok := s.Driver().(backend.Tracker); !ok {
		return nil, fmt.Errorf("sandboxtest.Track needs the docker backend; this process uses %s", s.Driver().Name())
	}
	name := s.NextName()
	g := &Guard{o: t.o, name: name, s: s, origin: t.origin}
	t.o.addCleanup(g.cleanup)
	note, err := s.AdmitFrom(sandboxKind, name, t.origin)
	if msg := watchdogNote(s, note); msg != "" {
		t.o.logf("%s", msg)
	}
	if err != nil {
		return nil, fmt.Errorf("sandboxtest.Track: %w", err)
	}
	return g, nil
}

func (t *tracker) Customize(req *testcontainers.GenericContainerRequest) error {
	t.mu.Lock()
	g, err := t.first, t.err
	t.first, t.err = nil, nil
	t.mu.Unlock()
	if g == nil && err == nil {
		// The customizer given to a second container.
		g, err = t.admit()
	}
	if err != nil {
		return err
	}
	s, name := g.s, g.name
	sbx, err := s.Driver().(backend.Tracker).Track(req, name, s.RunID(), g.origin)
	if err != nil {
		return fmt.Errorf("sandboxtest.Track: %w", err)
	}
	g.setSandbox(sbx)
	req.LifecycleHooks = append(req.LifecycleHooks, testcontainers.ContainerLifecycleHooks{
		// An option after Track that renamed the container would create one
		// the ledger does not list: refuse before it is created.
		PreCreates: []testcontainers.ContainerRequestHook{func(_ context.Context, r testcontainers.ContainerRequest) error {
			if r.Name != name {
				return fmt.Errorf("sandboxtest.Track must be the last option: a later one renamed the container %s to %q, which the ledger does not list", name, r.Name)
			}
			return nil
		}},
		PostCreates: []testcontainers.ContainerHook{func(_ context.Context, c testcontainers.Container) error {
			s.Created(sandboxKind, name, c.GetContainerID())
			return nil
		}},
	})
	return nil
}
