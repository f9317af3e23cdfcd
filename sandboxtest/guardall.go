package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// GuardAll makes Main guard every container and network the test binary
// creates, whatever creates it — a testcontainers-go module without
// Track, ory/dockertest, the Docker client, a `docker run` the test
// starts — exactly as a Start sandbox is guarded:
//
//	func TestMain(m *testing.M) { sandboxtest.Main(m, sandboxtest.GuardAll()) }
//
// Before anything reaches the engine, Main starts a proxy of the engine's
// API on a socket in a private folder and points DOCKER_HOST at it, for
// this process and the children that inherit its environment. Every
// container and network create through it (Docker's API, or Podman's own)
// is written to the run's ledger and labelled with the run before the
// engine sees it; the watchdog is told its id; at the end of Main, or when
// the binary dies, it goes like any other sandbox of the run. What the
// engine removes through it is forgotten by the run. Named volumes and
// image builds (testcontainers-go's FromDockerfile) through Docker's API
// are listed and labelled the same way before the engine sees them, and
// removed with the run; one still in use is kept for the next sweep, and
// an image that had a build's tag before is never touched. Everything else
// (logs, exec and attach, copies, events) passes through unchanged. A
// create passes as it came only when its run label names a live run of
// this ledger, or it carries the keep-alive label. Refused, with a reason:
// a keep-alive name without that label, Podman pods, play kube, restores
// from a checkpoint.
//
// testcontainers-go's Ryuk is turned off for the binary, since every
// container it makes is guarded. GuardAll fails Main, with one line
// saying why, when the engine does not answer, when it is reached over
// TLS, when a tc.host property or a Docker context would send clients
// past the proxy, or when testcontainers-go found its engine before Main
// (a provider or container made by a package-level variable or an init:
// it keeps that engine, and all it makes would escape). A Docker client
// made before Main talks to the engine directly, unseen: make clients in
// tests or Setup. It needs the docker backend and a unix socket (not
// Windows).
func GuardAll() Option {
	return mainOption(func(c *mainConfig) { c.guardAll = true })
}

// allHook admits the creates the proxy sees into this process's run.
type allHook struct {
	noted atomic.Bool
}

func (h *allHook) Admit(ctx context.Context, k names.Kind, name string) (string, string, origin.Origin, error) {
	s, err := getSession(ctx)
	if err != nil {
		return "", "", origin.Origin{}, err
	}
	useName := ""
	if name == "" {
		if k == networkKind {
			var b [4]byte
			if _, err := rand.Read(b[:]); err != nil {
				return "", "", origin.Origin{}, err
			}
			useName = names.NetworkPrefix + hex.EncodeToString(b[:])
		} else {
			useName = s.NextName()
		}
		name = useName
	}
	og := creatorNow()
	note, err := s.AdmitFrom(k, name, og)
	if err != nil {
		return "", "", origin.Origin{}, err
	}
	first := !h.noted.Swap(true)
	if msg := watchdogNote(s, note); msg != "" && first && verbose() {
		fmt.Fprintln(stdout(), msg)
	}
	return s.RunID(), useName, og, nil
}

// creatorNow is what makes the create that came in now: the test the
// stacks of the process name (origin.Creator), or, outside the tests,
// Main's Setup, or no test.
func creatorNow() origin.Origin {
	og := origin.Creator()
	switch mainPhase.Load() {
	case phaseSetup:
		return origin.Setup(mainName(), og.Place)
	case phaseMain:
		return origin.NoTest(mainName(), og.Place)
	}
	return og
}

// Labels are the run's driver's (backend.RunLabeler), as on everything
// else the run creates: the run's, and the kept mark once an engine-side
// keeper holds it.
func (h *allHook) Labels(runID string) map[string]string {
	if s, err := getSession(context.Background()); err == nil {
		if l, ok := s.Driver().(backend.RunLabeler); ok {
			return l.RunLabels(runID)
		}
	}
	return map[string]string{backend.LabelRunID: runID, backend.LabelRunIDAlt: runID}
}

func (h *allHook) Created(k names.Kind, name, id string) {
	if s, err := getSession(context.Background()); err == nil {
		s.Created(k, name, id)
	}
}

func (h *allHook) Removed(k names.Kind, name string) {
	s, err := getSession(context.Background())
	if err != nil {
		return
	}
	if err := s.Forget(k, name); err != nil {
		warnf("sandboxtest: GuardAll: %s %s is gone from the engine, but the ledger still lists it: %v", k, name, err)
	}
}

// Live: this process's run, or a run whose record in this process's
// ledger names a live owner.
func (h *allHook) Live(runID string) bool {
	s, err := getSession(context.Background())
	if err != nil {
		return false
	}
	return liveRun(s.CacheDir(), s.RunID(), runID)
}

// liveRun reports whether id is own, or a run of the ledger in cache
// whose record names an owner that is alive.
func liveRun(cache, own, id string) bool {
	if id == own {
		return true
	}
	return reaper.RunAlive(cache, id)
}

// guardDirPrefix names the private folders of GuardAll's proxy sockets,
// in the temporary directory.
const guardDirPrefix = "rightsize-guard-"

// startGuardAll starts the guard of every create, its socket in a new
// private folder, before the session (and with it testcontainers-go)
// first reaches the engine.
func startGuardAll(ctx context.Context) (backend.AllGuard, func(), error) {
	// What binaries killed with GuardAll on left: their folders go here.
	removeStaleGuardDirs(os.TempDir(), time.Now())
	dir, err := os.MkdirTemp("", guardDirPrefix)
	if err != nil {
		return nil, nil, fmt.Errorf("GuardAll: a private folder for the proxy's socket: %w", err)
	}
	g, err := backend.StartAllGuard(ctx, dir, &allHook{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("GuardAll: %w", err)
	}
	if n := g.Note(); n != "" && verbose() {
		fmt.Fprintf(stdout(), "sandboxtest: %s\n", n)
	}
	return g, func() {
		if err := g.Close(); err != nil {
			warnf("sandboxtest: GuardAll: closing the proxy: %v", err)
		}
		os.RemoveAll(dir)
	}, nil
}
