package reaper

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"time"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// useLock is a keep-alive sandbox's use lock (ledger.KeepAliveUseLock) as
// a process that adopts or creates it holds it: shared for the life of the
// process, so that while any process on the host holds it, neither
// `rightsize reuse prune`, an expiring sweep, nor a process replacing it
// for a stale image removes the sandbox under it, whatever cache dir each
// one uses.
type useLock struct{ l *ledger.FileLock }

// useRetry is how often a use lock held the other way is tried again.
const useRetry = 20 * time.Millisecond

// uses are the use locks of this process, one per keep-alive: each is
// held once, by whichever of its guards came first.
var (
	usesMu sync.Mutex
	uses   = map[string]*useLock{}
)

// keepAliveUseLock is the use lock of keep-alive name on the session's
// engine, the same one every time this process asks.
func (s *Session) keepAliveUseLock(name string) (*useLock, error) {
	usesMu.Lock()
	defer usesMu.Unlock()
	dir, err := ledger.UseDir("")
	if err != nil {
		return nil, err
	}
	l, err := ledger.KeepAliveUseLock(dir, s.drv.Name(), s.drv.Endpoint(), name)
	if err != nil {
		return nil, err
	}
	if held := uses[l.Path()]; held != nil {
		return held, nil
	}
	u := &useLock{l: l}
	uses[l.Path()] = u
	return u, nil
}

// Held reports whether this process holds it already.
func (u *useLock) Held() bool { return u.l.Held() }

// Path is the lock file's.
func (u *useLock) Path() string { return u.l.Path() }

// Share takes it shared, waiting while a process holds it exclusively
// (one removing the sandbox) until ctx ends; false when it did not.
func (u *useLock) Share(ctx context.Context) (bool, error) {
	return u.l.TryRLockContext(ctx, useRetry)
}

// Unlock lets it go.
func (u *useLock) Unlock() error { return u.l.Unlock() }

// TryExclusive takes it exclusively when no other process holds it,
// giving up this process's own shared hold for the attempt; false when
// another process uses the sandbox (and this process's hold is back).
func (u *useLock) TryExclusive(ctx context.Context) bool {
	_ = u.l.Unlock()
	ok, err := u.l.TryLock()
	if err != nil || !ok {
		_, _ = u.l.TryRLockContext(ctx, useRetry)
		return false
	}
	return true
}

// recordKeepAliveUse writes this process's use of keep-alive name (of
// identity hash) in its use records, with the idle time-to-live its spec
// asks for (0: none): in the use dir, which every sweep of the host's
// reads, and in the registry folder of the cache dir, which outlives a
// temporary folder the system empties.
func (s *Session) recordKeepAliveUse(name, hash string, ttl time.Duration) error {
	u := ledger.KeepAliveUse{Name: name, Backend: s.drv.Name(), Endpoint: s.drv.Endpoint(), Hash: hash}
	if ttl > 0 {
		u.TTL = ttl.String()
	}
	var errs []error
	if dir, err := ledger.UseDir(""); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, ledger.WriteKeepAliveUse(dir, u))
	}
	errs = append(errs, ledger.WriteKeepAliveUse(filepath.Join(s.cache, ledger.ReuseDir), u))
	return errors.Join(errs...)
}

// TouchKeepAliveUse marks keep-alive name used at now in its use records:
// its test is done with it.
func (s *Session) TouchKeepAliveUse(name string, now time.Time) {
	dirs := []string{filepath.Join(s.cache, ledger.ReuseDir)}
	if dir, err := ledger.UseDir(""); err == nil {
		dirs = append(dirs, dir)
	}
	for _, dir := range dirs {
		if path, err := ledger.KeepAliveUsePath(dir, s.drv.Name(), s.drv.Endpoint(), name); err == nil {
			_ = ledger.TouchKeepAliveUse(path, now)
		}
	}
}

// creationLock is the creation lock of a keep-alive in the session's cache
// dir (ledger.ReuseLockPath): a process holds it while it creates the
// sandbox and writes its registry entry, so that two sharing the cache dir
// never create it twice.
type creationLock struct{ l *ledger.FileLock }

// keepAliveCreationLock is the creation lock of the keep-alive of identity
// hash, its folder made (the registry folder, where the use records of
// the cache dir are written too); not yet taken.
func (s *Session) keepAliveCreationLock(hash string) (*creationLock, error) {
	if _, err := ledger.EnsureSubdir(s.cache, ledger.ReuseDir); err != nil {
		return nil, err
	}
	return &creationLock{l: ledger.NewFileLock(ledger.ReuseLockPath(s.cache, hash))}, nil
}

// Lock takes it, waiting while another process holds it until ctx ends;
// false when it did not.
func (c *creationLock) Lock(ctx context.Context) (bool, error) {
	return c.l.TryLockContext(ctx, useRetry)
}

// Unlock lets it go.
func (c *creationLock) Unlock() error { return c.l.Unlock() }

// Path is the lock file's.
func (c *creationLock) Path() string { return c.l.Path() }

// keepAliveEntry is what the family's registry says of a keep-alive this
// process created.
type keepAliveEntry struct {
	Name, Image string
	// ImageID is the engine's id of the image it was created from; "" when
	// not known.
	ImageID string
	// Ports are its ports as its Spec gives them, in the Spec's order.
	Ports []keepAlivePort
}

// keepAlivePort is a port as a Spec gives it ("8080/tcp", "53/udp") and
// the host port it is reached at.
type keepAlivePort struct {
	Port string
	Host int
}

// writeKeepAliveEntry writes e, the created keep-alive of identity hash,
// in the family's registry of the session's cache dir, reuse/<hash>.json.
func (s *Session) writeKeepAliveEntry(hash string, e keepAliveEntry) error {
	entry := ledger.ReuseEntry{Name: e.Name, Image: e.Image, ImageID: e.ImageID, Backend: s.drv.Name(), Ports: map[string]int{}}
	for _, p := range e.Ports {
		key, udp := ledger.PortKey(p.Port)
		if udp {
			if entry.UDPPorts == nil {
				entry.UDPPorts = map[string]int{}
			}
			entry.UDPPorts[key] = p.Host
		} else {
			entry.Ports[key] = p.Host
		}
	}
	return ledger.WriteReuseEntry(s.cache, hash, entry)
}
