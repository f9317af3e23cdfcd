package sandboxtest

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/backend/docker"
)

// Track returns a testcontainers-go customizer that gives a container
// started by testcontainers.Run, or by any testcontainers-go module, what
// Start gives: a rightsize name and labels, a ledger line before it is
// created, the watchdog, ports on the loopback address, and its removal
// registered with tb.Cleanup. Put it last among the options, so nothing
// after it renames the container:
//
//	ctr, err := postgres.Run(ctx, "postgres:16", sandboxtest.Track(t))
//
// It needs the Docker backend. Calling Terminate on the container as well
// is harmless.
func Track(tb testing.TB) testcontainers.ContainerCustomizer {
	return tracker{tbOwner{tb}}
}

type tracker struct{ o owner }

func (t tracker) Customize(req *testcontainers.GenericContainerRequest) error {
	s, err := getSession(t.o.context())
	if err != nil {
		return fmt.Errorf("sandboxtest.Track: %w", err)
	}
	d, ok := s.drv.(*docker.Driver)
	if !ok {
		return fmt.Errorf("sandboxtest.Track needs the docker backend; this process uses %s", s.drv.Name())
	}
	name := s.nextName()
	g := &Guard{o: t.o, name: name, s: s, sbx: d.SandboxFor(name)}
	t.o.Cleanup(g.cleanup)
	// The watchdog before the first ledger write, as in Guard.start.
	if _, err := s.ensureWatchdog(); err != nil {
		t.o.Logf("sandboxtest: no watchdog for this process (%v)", err)
	}
	if err := s.addSandbox(name); err != nil {
		return fmt.Errorf("sandboxtest.Track: %w", err)
	}
	req.Name = name
	if req.Labels == nil {
		req.Labels = map[string]string{}
	}
	maps.Copy(req.Labels, s.runLabels())
	d.Apply(req)
	// An option after Track that renamed the container would create one
	// the ledger does not list: refuse before it is created.
	req.LifecycleHooks = append(req.LifecycleHooks, testcontainers.ContainerLifecycleHooks{
		PreCreates: []testcontainers.ContainerRequestHook{func(_ context.Context, r testcontainers.ContainerRequest) error {
			if r.Name != name {
				return fmt.Errorf("sandboxtest.Track must be the last option: a later one renamed the container %s to %q, which the ledger does not list", name, r.Name)
			}
			return nil
		}},
	})
	return nil
}
