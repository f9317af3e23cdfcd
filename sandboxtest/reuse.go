package sandboxtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/ledger"
)

// envReuse enables keep-alive reuse when "true" or "1": a Spec must also
// ask for it with Reuse.
const envReuse = "RIGHTSIZE_REUSE"

// reuseEnabled: exactly "true" or "1", as the rest of the family reads it.
func reuseEnabled() bool {
	v := strings.TrimSpace(os.Getenv(envReuse))
	return v == "1" || v == "true"
}

// reuseIdentity is the identity a keep-alive sandbox of spec is found by,
// hashed as the whole rightsize family hashes it: the key every member
// shares a keep-alive sandbox by.
func reuseIdentity(spec Spec) ledger.ReuseIdentity {
	id := ledger.ReuseIdentity{Image: spec.Image, Env: spec.Env, Command: spec.Cmd, ExposedPorts: spec.Ports, MemoryLimitMB: spec.MemoryLimitMB}
	for _, f := range spec.Files {
		sum := sha256.Sum256(f.Content)
		id.Copies = append(id.Copies, ledger.ReuseCopy{GuestPath: f.GuestPath, SHA256: hex.EncodeToString(sum[:])})
	}
	return id
}

// reuseExtra is rightsize-go's own part of a keep-alive identity: what
// changes the container but not the family's hash (a ReuseKey naming what
// Customize does, the labels, the files' modes). Empty when there is none,
// so that a spec the other members could have made shares their sandbox.
func reuseExtra(spec Spec) string {
	var b strings.Builder
	if spec.ReuseKey != "" {
		fmt.Fprintf(&b, "key=%q\n", spec.ReuseKey)
	}
	keys := make([]string, 0, len(spec.Labels))
	for k := range spec.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "label=%q=%q\n", k, spec.Labels[k])
	}
	for _, f := range spec.Files {
		if m := f.Mode.Perm(); m != 0 && m != 0o644 {
			fmt.Fprintf(&b, "mode=%q=%o\n", f.GuestPath, m)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])[:12]
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
func (g *Guard) startReuse(ctx context.Context) (string, error) {
	hash := reuseIdentity(g.spec).Hash()
	mark, extra := hash[:12], reuseExtra(g.spec)
	g.name, g.keepAlive = ledger.ReuseName(hash), true
	lock, err := g.s.KeepAliveCreationLock(hash)
	if err != nil {
		return "", err
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// In use from before the adoption: a prune that holds the use lock
	// removes the sandbox before this process can adopt it, and none can
	// remove it once this process might. Taken before the creation lock,
	// which a prune takes while it holds the use lock.
	use, err := g.s.UseLock(g.name)
	if err != nil {
		return "", fmt.Errorf("keep-alive %s: %w", g.name, err)
	}
	held := use.Held()
	if ok, err := use.Share(lctx); err != nil || !ok {
		return "", fmt.Errorf("keep-alive %s: use lock %s: %v", g.name, use.Path(), err)
	}
	// Recorded under the lock: a sweep that takes it next judges this use.
	if err := g.s.RecordKeepAliveUse(g.name, hash, g.spec.ReuseTTL); err != nil {
		warnf("sandboxtest: keep-alive %s: its use is not recorded (%v): a sweep with a time-to-live may judge it idle since an earlier use", g.name, err)
	}
	adopted := false
	if !held {
		defer func() {
			if !adopted {
				_ = use.Unlock()
			}
		}()
	}
	ok, err := lock.Lock(lctx)
	if err != nil || !ok {
		return "", fmt.Errorf("keep-alive %s: lock %s: %v", g.name, lock.Path(), err)
	}
	defer lock.Unlock()

	drv := g.s.Driver()
	ka, _ := drv.(backend.KeepAliver)
	var notes []string
	// The lock keeps processes sharing this cache dir apart; the name keeps
	// apart those that do not (another cache dir, another user): a create
	// that finds the name taken waits for that container instead.
	// removeAlone removes the keep-alive while this process alone holds
	// its use lock (taken alone, then shared again); false, and nothing
	// removed, while another process holds it: it is that process's.
	removeAlone := func(what string) (bool, error) {
		if !use.TryExclusive(lctx) {
			return false, nil
		}
		rerr := ka.RemoveKeepAlive(ctx, g.name, mark)
		_ = use.Unlock()
		if rerr != nil && !errors.Is(rerr, backend.ErrNotFound) {
			return true, fmt.Errorf("keep-alive %s: %s: %w", g.name, what, rerr)
		}
		if ok, err := use.Share(lctx); err != nil || !ok {
			return true, fmt.Errorf("keep-alive %s: use lock %s: %v", g.name, use.Path(), err)
		}
		return true, nil
	}
	var sbx backend.Sandbox
	var startingSince time.Time
	created := false
	for sbx == nil {
		sbx, err = drv.Adopt(ctx, g.name)
		switch {
		case err == nil:
			replace, why, derr := g.checkAdopted(ctx, sbx, ka, mark, extra)
			if derr != nil {
				return "", derr
			}
			if !replace {
				break
			}
			alone, rerr := removeAlone("remove it to replace it")
			if rerr != nil {
				return "", rerr
			}
			if !alone {
				notes = append(notes, fmt.Sprintf("sandboxtest: keep-alive %s: %s, but another process is using it: adopted as it is", g.name, why))
				break
			}
			notes = append(notes, fmt.Sprintf("sandboxtest: keep-alive %s: %s: replaced", g.name, why))
			sbx = nil
		case errors.Is(err, backend.ErrStarting) && startingSince.IsZero():
			startingSince = time.Now()
			sbx = nil
		case errors.Is(err, backend.ErrStarting) && time.Since(startingSince) < reuseStartWait:
			// Someone is starting it: adopt it once it runs.
			sbx = nil
		case errors.Is(err, backend.ErrNotFound):
			// None, a stopped one, or one left half-started by a process
			// that died: the last two are in the way. One that another
			// live process holds (an engine restart stopped it under that
			// process, or that process is still starting it) is that
			// process's: never removed from under it.
			if errors.Is(err, backend.ErrStopped) || errors.Is(err, backend.ErrStarting) {
				if ka == nil {
					return "", fmt.Errorf("keep-alive %s: one is there but not running, and this backend cannot remove it", g.name)
				}
				alone, rerr := removeAlone("remove the one not running")
				if rerr != nil {
					return "", rerr
				}
				if !alone {
					return "", fmt.Errorf("keep-alive %s: one is there but not running (%v), and another process is using it: it is left to that process; once none is, the next test replaces it (or rightsize reuse rm %s)", g.name, err, g.name)
				}
			}
			bs := g.backendSpec("", mark, extra)
			bs.Test, bs.TestPlace = g.madeBy()
			sbx, err = drv.Create(ctx, g.name, bs)
			if err == nil {
				created = true
				break
			}
			if !errors.Is(err, backend.ErrNameTaken) {
				return "", g.removeUnready(ka, mark, err)
			}
			sbx, startingSince = nil, time.Time{}
		default:
			return "", err
		}
		if sbx != nil {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("keep-alive %s: waiting for it to run: %w", g.name, ctx.Err())
		case <-time.After(reusePoll):
		}
	}
	adopted = true // in use by this process from now on
	g.setSandbox(sbx)
	if created {
		g.writeRegistry(ctx, hash, sbx, ka)
	} else {
		notes = append(notes, "sandboxtest: adopted keep-alive "+g.name)
	}
	return strings.Join(notes, "\n"), nil
}

// removeUnready removes the keep-alive this process failed to create
// (created, then never ready: its wait strategy failed) and returns the
// creation's error. Its registry entry is written only once it is ready,
// so left running it would be a keep-alive with no entry: the next Go
// test would adopt it unready, and the other members remove it on sight.
// The name is this process's under the creation lock; one another process
// holds is ErrNameTaken, never here.
func (g *Guard) removeUnready(ka backend.KeepAliver, mark string, cerr error) error {
	if ka == nil {
		return cerr
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	switch err := ka.RemoveKeepAlive(ctx, g.name, mark); {
	case err == nil:
		return fmt.Errorf("%w (the keep-alive %s, which never became ready, was removed)", cerr, g.name)
	case errors.Is(err, backend.ErrNotFound):
		return cerr
	default:
		return fmt.Errorf("%w (the keep-alive %s never became ready, and could not be removed: %v; rightsize reuse rm %s)", cerr, g.name, err, g.name)
	}
}

// checkAdopted decides whether an adopted keep-alive sandbox is the one
// the spec asks for: an error when it was made from another Go-only spec
// (its extra mark differs), replace when its image is not what the tag
// names now.
func (g *Guard) checkAdopted(ctx context.Context, sbx backend.Sandbox, ka backend.KeepAliver, mark, extra string) (replace bool, why string, err error) {
	d, ok := sbx.(backend.Describer)
	if !ok {
		return false, "", nil
	}
	desc, err := d.Describe(ctx)
	if err != nil {
		return false, "", nil // adopt what runs; the next call will say more
	}
	if desc.KeepAlive != "" && !familyMark(desc.KeepAlive, g.name, mark) {
		return false, "", fmt.Errorf("keep-alive %s carries the keep-alive mark %s, not %s: a container of that name that is not this sandbox; remove it (docker rm -f %s)", g.name, desc.KeepAlive, mark, g.name)
	}
	if desc.KeepAliveExtra != extra {
		return false, "", fmt.Errorf("keep-alive %s was made from a spec that differs in what only rightsize-go sees (ReuseKey, Labels, file modes: %q, want %q); give this spec another ReuseKey, or remove the old sandbox (rightsize reuse rm %s)", g.name, desc.KeepAliveExtra, extra, g.name)
	}
	if ka == nil || desc.ImageID == "" {
		return false, "", nil
	}
	now, err := ka.ImageID(ctx, g.spec.Image)
	if err != nil || now == desc.ImageID {
		return false, "", nil
	}
	return true, fmt.Sprintf("%s now names image %s, and it runs %s", g.spec.Image, shortImage(now), shortImage(desc.ImageID)), nil
}

// familyMark reports whether mark is how a member of the family marks the
// keep-alive sandbox name of identity hash12: Go, Rust and Kotlin write the
// name's 12 hex digits, Node the first 12 hex of the name's own sha256.
func familyMark(mark, name, hash12 string) bool {
	if mark == hash12 {
		return true
	}
	sum := sha256.Sum256([]byte(name))
	return mark == hex.EncodeToString(sum[:])[:12]
}

func shortImage(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// writeRegistry records the created keep-alive sandbox in the family's
// registry, reuse/<hash>.json.
func (g *Guard) writeRegistry(ctx context.Context, hash string, sbx backend.Sandbox, ka backend.KeepAliver) {
	entry := reaper.KeepAliveEntry{Name: g.name, Image: g.spec.Image}
	for _, p := range g.spec.Ports {
		hp, err := sbx.MappedPort(ctx, p)
		if err != nil {
			continue
		}
		var n int
		if _, err := fmt.Sscan(hp, &n); err != nil {
			continue
		}
		entry.Ports = append(entry.Ports, reaper.KeepAlivePort{Port: p, Host: n})
	}
	if ka != nil {
		entry.ImageID, _ = ka.ImageID(ctx, g.spec.Image)
	}
	if err := g.s.WriteKeepAliveEntry(hash, entry); err != nil {
		warnf("sandboxtest: keep-alive %s: registry: %v", g.name, err)
	}
}

// madeBy is the test that creates the keep-alive and the place in its
// code (file:line), for its labels: a keep-alive made later by the same
// test at the same place supersedes it. Nothing when no test is running
// (a suite's Setup, TestMain).
func (g *Guard) madeBy() (test, place string) {
	tb := g.o.testTB()
	if tb == nil {
		return "", ""
	}
	return tb.Name(), g.origin.Place
}
