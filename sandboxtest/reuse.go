package sandboxtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/ledger"
)

// EnvReuse enables keep-alive reuse when "true" or "1": a Spec must also
// ask for it with Reuse.
const EnvReuse = "RIGHTSIZE_REUSE"

// reuseEnabled: exactly "true" or "1", as the rest of the family reads it.
func reuseEnabled() bool {
	v := strings.TrimSpace(os.Getenv(EnvReuse))
	return v == "1" || v == "true"
}

// ReuseIdentity is the identity a keep-alive sandbox of spec is found by,
// hashed as the whole rightsize family hashes it.
func ReuseIdentity(spec Spec) ledger.ReuseIdentity {
	id := ledger.ReuseIdentity{Image: spec.Image, Env: spec.Env, Command: spec.Cmd, ExposedPorts: spec.Ports, MemoryLimitMB: spec.MemoryLimitMB}
	for _, f := range spec.Files {
		sum := sha256.Sum256(f.Content)
		id.Copies = append(id.Copies, ledger.ReuseCopy{GuestPath: f.GuestPath, SHA256: hex.EncodeToString(sum[:])})
	}
	return id
}

// How a keep-alive sandbox that someone else is starting is waited for:
// polled every reusePoll; one still not running after reuseStartWait was
// left half-started by a process that died, and is replaced.
const (
	reusePoll      = 100 * time.Millisecond
	reuseStartWait = 30 * time.Second
)

// startReuse adopts the running keep-alive sandbox of this identity, or
// creates it. Creation happens under a file lock, so two processes never
// create it twice. It is never listed in the ledger and carries no run
// label: no sweep, watchdog or run-scoped close can match it.
func (g *Guard) startReuse(ctx context.Context) error {
	if len(g.spec.Networks) > 0 {
		return errors.New("a keep-alive sandbox cannot join a test's network (the network goes when the test ends)")
	}
	hash := ReuseIdentity(g.spec).Hash()
	g.name, g.keepAlive = ledger.ReuseName(hash), true
	dir, err := ledger.EnsureSubdir(g.s.cache, ledger.ReuseDir)
	if err != nil {
		return err
	}
	lock := flock.New(filepath.Join(dir, hash+".lock"), flock.SetPermissions(0o600))
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ok, err := lock.TryLockContext(lctx, 20*time.Millisecond)
	if err != nil || !ok {
		return fmt.Errorf("keep-alive %s: lock %s: %v", g.name, lock.Path(), err)
	}
	defer lock.Unlock()

	// The lock keeps processes sharing this cache dir apart; the name keeps
	// apart those that do not (another cache dir, another user): a create
	// that finds the name taken waits for that container instead.
	var sbx backend.Sandbox
	var startingSince time.Time
	for {
		sbx, err = g.s.drv.Adopt(ctx, g.name)
		switch {
		case err == nil:
			g.sbx = sbx
			g.o.Logf("sandboxtest: adopted keep-alive %s", g.name)
			return nil
		case errors.Is(err, backend.ErrStarting) && startingSince.IsZero():
			startingSince = time.Now()
		case errors.Is(err, backend.ErrStarting) && time.Since(startingSince) < reuseStartWait:
			// Someone is starting it: adopt it once it runs.
		case errors.Is(err, backend.ErrNotFound):
			// None, a stopped one, or one left half-started by a process
			// that died: the last two are in the way.
			if errors.Is(err, backend.ErrStopped) || errors.Is(err, backend.ErrStarting) {
				if err := g.s.drv.RemoveSandboxes(ctx, []string{g.name})[0]; err != nil && !errors.Is(err, backend.ErrNotFound) {
					return fmt.Errorf("keep-alive %s: remove the one not running: %w", g.name, err)
				}
			}
			sbx, err = g.create(ctx, g.name, map[string]string{docker.LabelReuse: hash[:12]})
			if err == nil {
				break
			}
			if !errors.Is(err, backend.ErrNameTaken) {
				return err
			}
			sbx, startingSince = nil, time.Time{}
		default:
			return err
		}
		if sbx != nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("keep-alive %s: waiting for it to run: %w", g.name, ctx.Err())
		case <-time.After(reusePoll):
		}
	}
	g.sbx = sbx
	entry := ledger.ReuseEntry{Name: g.name, Image: g.spec.Image, Backend: g.s.drv.Name(), Ports: map[string]string{}}
	for _, p := range g.spec.Ports {
		if hp, err := sbx.MappedPort(ctx, p); err == nil {
			entry.Ports[p] = hp
		}
	}
	if err := ledger.WriteReuseEntry(g.s.cache, hash, entry); err != nil {
		g.o.Logf("sandboxtest: keep-alive %s: registry: %v", g.name, err)
	}
	return nil
}
