package reaper

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/ledger"
)

// KeepAliveRequest is a keep-alive sandbox as a test asks for it: the
// family's identity and rightsize-go's own part of it, and what to create
// when none runs.
type KeepAliveRequest struct {
	// Hash is the family's identity hash (ledger.ReuseIdentity.Hash): the
	// sandbox's name and keep-alive mark come from it.
	Hash string
	// Extra is rightsize-go's own part of the identity, what changes the
	// sandbox but not the family's hash; "" when there is none.
	Extra string
	// TTL is the spec's own time-to-live, recorded with this use; 0 for
	// the environment's.
	TTL time.Duration
	// Spec is what to create: the sandbox as the backend takes it, its
	// test and place set; its keep-alive marks are set here.
	Spec backend.Spec
	// Warn, when set, is told at once what goes wrong without failing the
	// start (a use or a registry entry not written), for stderr, where it
	// is seen without -v.
	Warn func(string)
}

// warn tells r.Warn, when there is one.
func (r KeepAliveRequest) warn(format string, args ...any) {
	if r.Warn != nil {
		r.Warn(fmt.Sprintf(format, args...))
	}
}

// KeepAlive is a keep-alive sandbox a process has adopted or created, and
// holds in use for as long as it lives.
type KeepAlive struct {
	Sandbox backend.Sandbox
	// Notes are for the test's log: adopted, replaced, adopted as it is.
	Notes []string
}

// How a keep-alive sandbox that someone else is starting is waited for:
// polled every keepAlivePoll; one still not running after
// keepAliveStartWait was left half-started by a process that died, and is
// replaced.
const (
	keepAlivePoll      = 100 * time.Millisecond
	keepAliveStartWait = 30 * time.Second
)

// keepAliveRemoveTimeout bounds the removal of a keep-alive that was
// created and never became ready, which runs once the start's own context
// may be done.
const keepAliveRemoveTimeout = 60 * time.Second

// StartKeepAlive adopts the running keep-alive sandbox of req's identity
// (ledger.ReuseName of its hash), or creates it. It is never listed in the
// ledger and carries no run label: no sweep, watchdog or run-scoped close
// can match it. The order of the locks is the protocol with the other
// processes of the host: the use lock first (shared, and kept for the
// life of the process once adopted, so no prune, expiry or replacement
// removes it under this one), then the creation lock of the cache dir (so
// two processes sharing it never create it twice); the name keeps apart
// those that share neither.
func (s *Session) StartKeepAlive(ctx context.Context, req KeepAliveRequest) (*KeepAlive, error) {
	name, mark := ledger.ReuseName(req.Hash), req.Hash[:12]
	out := &KeepAlive{}
	lock, err := s.keepAliveCreationLock(req.Hash)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// In use from before the adoption: a prune that holds the use lock
	// removes the sandbox before this process can adopt it, and none can
	// remove it once this process might. Taken before the creation lock,
	// which a prune takes while it holds the use lock.
	use, err := s.keepAliveUseLock(name)
	if err != nil {
		return nil, fmt.Errorf("keep-alive %s: %w", name, err)
	}
	held := use.Held()
	if ok, err := use.Share(lctx); err != nil || !ok {
		return nil, fmt.Errorf("keep-alive %s: use lock %s: %v", name, use.Path(), err)
	}
	// Recorded under the lock: a sweep that takes it next judges this use.
	if err := s.recordKeepAliveUse(name, req.Hash, req.TTL); err != nil {
		req.warn("keep-alive %s: its use is not recorded (%v): a sweep with a time-to-live may judge it idle since an earlier use", name, err)
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
		return nil, fmt.Errorf("keep-alive %s: lock %s: %v", name, lock.Path(), err)
	}
	defer lock.Unlock()

	ka, _ := s.drv.(backend.KeepAliver)
	// removeAlone removes the keep-alive while this process alone holds
	// its use lock (taken alone, then shared again); false, and nothing
	// removed, while another process holds it: it is that process's.
	removeAlone := func(what string) (bool, error) {
		if !use.TryExclusive(lctx) {
			return false, nil
		}
		rerr := ka.RemoveKeepAlive(ctx, name, mark)
		_ = use.Unlock()
		if rerr != nil && !errors.Is(rerr, backend.ErrNotFound) {
			return true, fmt.Errorf("keep-alive %s: %s: %w", name, what, rerr)
		}
		if ok, err := use.Share(lctx); err != nil || !ok {
			return true, fmt.Errorf("keep-alive %s: use lock %s: %v", name, use.Path(), err)
		}
		return true, nil
	}
	var sbx backend.Sandbox
	var startingSince time.Time
	created := false
	for sbx == nil {
		sbx, err = s.drv.Adopt(ctx, name)
		switch {
		case err == nil:
			replace, why, derr := checkAdopted(ctx, sbx, ka, name, mark, req)
			if derr != nil {
				return nil, derr
			}
			if !replace {
				break
			}
			alone, rerr := removeAlone("remove it to replace it")
			if rerr != nil {
				return nil, rerr
			}
			if !alone {
				out.Notes = append(out.Notes, fmt.Sprintf("keep-alive %s: %s, but another process is using it: adopted as it is", name, why))
				break
			}
			out.Notes = append(out.Notes, fmt.Sprintf("keep-alive %s: %s: replaced", name, why))
			sbx = nil
		case errors.Is(err, backend.ErrStarting) && startingSince.IsZero():
			startingSince = time.Now()
			sbx = nil
		case errors.Is(err, backend.ErrStarting) && time.Since(startingSince) < keepAliveStartWait:
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
					return nil, fmt.Errorf("keep-alive %s: one is there but not running, and this backend cannot remove it", name)
				}
				alone, rerr := removeAlone("remove the one not running")
				if rerr != nil {
					return nil, rerr
				}
				if !alone {
					return nil, fmt.Errorf("keep-alive %s: one is there but not running (%v), and another process is using it: it is left to that process; once none is, the next test replaces it (or rightsize reuse rm %s)", name, err, name)
				}
			}
			bs := req.Spec
			bs.RunID, bs.KeepAlive, bs.KeepAliveExtra = "", mark, req.Extra
			sbx, err = s.drv.Create(ctx, name, bs)
			if err == nil {
				created = true
				break
			}
			if !errors.Is(err, backend.ErrNameTaken) {
				return nil, removeUnready(ka, name, mark, err)
			}
			sbx, startingSince = nil, time.Time{}
		default:
			return nil, err
		}
		if sbx != nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("keep-alive %s: waiting for it to run: %w", name, ctx.Err())
		case <-time.After(keepAlivePoll):
		}
	}
	adopted = true // in use by this process from now on
	out.Sandbox = sbx
	if created {
		if err := s.writeRegistry(ctx, name, req, sbx, ka); err != nil {
			req.warn("keep-alive %s: registry: %v", name, err)
		}
	} else {
		out.Notes = append(out.Notes, "adopted keep-alive "+name)
	}
	return out, nil
}

// removeUnready removes the keep-alive this process failed to create
// (created, then never ready: its wait strategy failed) and returns the
// creation's error. Its registry entry is written only once it is ready,
// so left running it would be a keep-alive with no entry: the next Go
// test would adopt it unready, and the other members remove it on sight.
// The name is this process's under the creation lock; one another process
// holds is ErrNameTaken, never here.
func removeUnready(ka backend.KeepAliver, name, mark string, cerr error) error {
	if ka == nil {
		return cerr
	}
	ctx, cancel := context.WithTimeout(context.Background(), keepAliveRemoveTimeout)
	defer cancel()
	switch err := ka.RemoveKeepAlive(ctx, name, mark); {
	case err == nil:
		return fmt.Errorf("%w (the keep-alive %s, which never became ready, was removed)", cerr, name)
	case errors.Is(err, backend.ErrNotFound):
		return cerr
	default:
		return fmt.Errorf("%w (the keep-alive %s never became ready, and could not be removed: %v; rightsize reuse rm %s)", cerr, name, err, name)
	}
}

// checkAdopted decides whether an adopted keep-alive sandbox is the one
// req asks for: an error when it was made from another Go-only spec (its
// extra mark differs), replace when its image is not what the tag names
// now.
func checkAdopted(ctx context.Context, sbx backend.Sandbox, ka backend.KeepAliver, name, mark string, req KeepAliveRequest) (replace bool, why string, err error) {
	d, ok := sbx.(backend.Describer)
	if !ok {
		return false, "", nil
	}
	desc, err := d.Describe(ctx)
	if err != nil {
		return false, "", nil // adopt what runs; the next call will say more
	}
	if desc.KeepAlive != "" && !familyMark(desc.KeepAlive, name, mark) {
		return false, "", fmt.Errorf("keep-alive %s carries the keep-alive mark %s, not %s: a container of that name that is not this sandbox; remove it (docker rm -f %s)", name, desc.KeepAlive, mark, name)
	}
	if desc.KeepAliveExtra != req.Extra {
		return false, "", fmt.Errorf("keep-alive %s was made from a spec that differs in what only rightsize-go sees (ReuseKey, Labels, file modes: %q, want %q); give this spec another ReuseKey, or remove the old sandbox (rightsize reuse rm %s)", name, desc.KeepAliveExtra, req.Extra, name)
	}
	if ka == nil || desc.ImageID == "" {
		return false, "", nil
	}
	now, err := ka.ImageID(ctx, req.Spec.Image)
	if err != nil || now == desc.ImageID {
		return false, "", nil
	}
	return true, fmt.Sprintf("%s now names image %s, and it runs %s", req.Spec.Image, shortImage(now), shortImage(desc.ImageID)), nil
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
// registry, reuse/<hash>.json: its ports where this process reaches them,
// and the image it was created from.
func (s *Session) writeRegistry(ctx context.Context, name string, req KeepAliveRequest, sbx backend.Sandbox, ka backend.KeepAliver) error {
	entry := keepAliveEntry{Name: name, Image: req.Spec.Image}
	for _, p := range req.Spec.Ports {
		hp, err := sbx.MappedPort(ctx, p)
		if err != nil {
			continue
		}
		var n int
		if _, err := fmt.Sscan(hp, &n); err != nil {
			continue
		}
		entry.Ports = append(entry.Ports, keepAlivePort{Port: p, Host: n})
	}
	if ka != nil {
		entry.ImageID, _ = ka.ImageID(ctx, req.Spec.Image)
	}
	return s.writeKeepAliveEntry(req.Hash, entry)
}
