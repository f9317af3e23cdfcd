package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/internal/names"
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
// create through it that no run owns yet is written to the run's ledger
// and labelled with the run before the engine sees it; the watchdog is
// told its id; at the end of Main, or when the binary dies, it goes like
// any other sandbox of the run. Everything else (logs, exec and attach,
// copies, events) passes through unchanged. Keep-alive sandboxes and what
// another run creates are left as they are.
//
// testcontainers-go's Ryuk is turned off for the binary, since every
// container it makes is guarded. GuardAll fails Main, with one line
// saying why, when the engine does not answer, when it is reached over
// TLS, or when a tc.host property or a Docker context would send clients
// past the proxy. It needs the docker backend and a unix socket (not
// Windows).
func GuardAll() Option {
	return mainOption(func(c *mainConfig) { c.guardAll = true })
}

// allHook admits the creates the proxy sees into this process's run.
type allHook struct {
	mu       sync.Mutex
	admitted map[names.Kind]map[string]bool
	noted    bool
}

func (h *allHook) Admit(ctx context.Context, k names.Kind, name string) (string, string, error) {
	s, err := getSession(ctx)
	if err != nil {
		return "", "", err
	}
	useName := ""
	if name == "" {
		if k == networkKind {
			var b [4]byte
			if _, err := rand.Read(b[:]); err != nil {
				return "", "", err
			}
			useName = names.NetworkPrefix + hex.EncodeToString(b[:])
		} else {
			useName = s.NextName()
		}
		name = useName
	}
	note, err := s.Admit(k, name)
	if err != nil {
		return "", "", err
	}
	h.mu.Lock()
	if h.admitted[k] == nil {
		h.admitted[k] = map[string]bool{}
	}
	h.admitted[k][name] = true
	first := !h.noted
	h.noted = true
	h.mu.Unlock()
	if msg := watchdogNote(s, note); msg != "" && first && verbose() {
		fmt.Fprintln(stdout(), msg)
	}
	return s.RunID(), useName, nil
}

func (h *allHook) Created(k names.Kind, name, id string) {
	h.mu.Lock()
	ours := h.admitted[k][name]
	h.mu.Unlock()
	if !ours {
		return
	}
	if s, err := getSession(context.Background()); err == nil {
		s.Created(k, name, id)
	}
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
	g, err := backend.StartAllGuard(ctx, dir, &allHook{admitted: map[names.Kind]map[string]bool{}})
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
