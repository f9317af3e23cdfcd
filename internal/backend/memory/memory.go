package memory

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
)

// EnvDir names the folder the backend keeps its sandboxes and networks
// in; unset, it is memory/ in the cache dir.
const EnvDir = "RIGHTSIZE_MEMORY_DIR"

// EnvJournal names a file every create and removal is appended to, by
// whichever process makes it (journal.go): what a test of the reaper
// checks who removed what, and when, against.
const EnvJournal = "RIGHTSIZE_MEMORY_JOURNAL"

// subdir is the default folder's name in the cache dir.
const subdir = "memory"

// endpointScheme starts Endpoint: the folder is what tells one memory
// "engine" from another.
const endpointScheme = "memory:"

// maxObject bounds what is read of one object file: a sandbox's spec is
// small, and a file that is not fails its reader rather than filling it.
const maxObject = 1 << 20

// lockRetry is how often a busy state lock is tried again until the
// caller's context ends.
const lockRetry = 2 * time.Millisecond

func init() {
	backend.Register(backend.Memory, func(context.Context) (backend.Driver, error) { return Open("") })
	// A native watchdog passes the endpoint it was started with (DOCKER_HOST
	// for Docker); the folder comes to it in EnvDir, from the plan's Env.
	// The watchdog's: the folder its owner made, never made again (a
	// test's temporary folder, removed as the test ended).
	backend.RegisterEndpoint(backend.Memory, func(string) (backend.Driver, error) { return open("", false) })
}

// driver is the memory backend on one folder. Its methods are safe for
// concurrent use by any number of processes.
type driver struct {
	dir     string
	def     bool
	journal string
}

// Open opens the memory backend on folder dir: when "", the one EnvDir
// names, else memory/ in the cache dir. The folder is created (mode 0700)
// when missing, and must be this user's alone, as the ledger's are. The
// driver is also a backend.RunLister, OwnershipChecker, RunCloser and
// KeepAliver, and its sandboxes are backend.Describers.
func Open(dir string) (backend.Driver, error) { return open(dir, true) }

// open is Open; without create, the folder must be there already.
func open(dir string, create bool) (backend.Driver, error) {
	def := false
	if dir == "" {
		dir = os.Getenv(EnvDir)
	}
	if dir == "" {
		cache, err := ledger.Dir()
		if err != nil {
			return nil, fmt.Errorf("memory backend: %w", err)
		}
		if !create {
			dir = filepath.Join(cache, subdir)
			err = ledger.CheckPrivate(dir)
		} else {
			dir, err = ledger.EnsureSubdir(cache, subdir)
		}
		if err != nil {
			return nil, fmt.Errorf("memory backend: %w", err)
		}
		def = true
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("memory backend: folder %q: %w", dir, err)
		}
		dir = abs
		if create {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("memory backend: %w", err)
			}
		}
		if err := ledger.CheckPrivate(dir); err != nil {
			return nil, fmt.Errorf("memory backend: %w", err)
		}
	}
	return &driver{dir: dir, def: def, journal: os.Getenv(EnvJournal)}, nil
}

func (d *driver) Name() string          { return backend.Memory }
func (d *driver) Endpoint() string      { return endpointScheme + d.dir }
func (d *driver) DefaultEndpoint() bool { return d.def }

// Host is empty: a memory sandbox publishes nothing.
func (d *driver) Host() string { return "" }
func (d *driver) Close() error { return nil }

// Watchdog: the watchdog (this program re-executed) opens the same
// folder.
func (d *driver) Watchdog(string) (backend.WatchdogPlan, error) {
	return backend.WatchdogPlan{Env: []string{backend.EnvBackend + "=" + backend.Memory, EnvDir + "=" + d.dir}}, nil
}

// object is one sandbox or network, as its file holds it.
type object struct {
	Kind           string              `json:"kind"`
	ID             string              `json:"id"`
	Name           string              `json:"name"`
	Run            string              `json:"run,omitempty"`
	KeepAlive      string              `json:"keepAlive,omitempty"`
	KeepAliveExtra string              `json:"keepAliveExtra,omitempty"`
	Image          string              `json:"image,omitempty"`
	Cmd            []string            `json:"cmd,omitempty"`
	Env            map[string]string   `json:"env,omitempty"`
	Ports          []string            `json:"ports,omitempty"`
	Networks       map[string][]string `json:"networks,omitempty"`
	Labels         map[string]string   `json:"labels,omitempty"`
	Files          []string            `json:"files,omitempty"`
	Created        time.Time           `json:"created"`
}

// path is the file of k's object name: the kind's word, then the name,
// which the name grammar keeps to one path element.
func (d *driver) path(k backend.Kind, name string) string {
	return filepath.Join(d.dir, k.String()+"."+name+".json")
}

// locked runs fn holding the folder's lock exclusively, against every
// other process using it.
func (d *driver) locked(ctx context.Context, fn func() error) error {
	l := ledger.NewFileLock(filepath.Join(d.dir, ".lock"))
	ok, err := l.TryLockContext(ctx, lockRetry)
	if err != nil || !ok {
		if err == nil {
			err = errors.New("lock not taken")
		}
		return fmt.Errorf("memory backend: lock %s: %w (%w)", l.Path(), backend.ErrUnreachable, err)
	}
	defer l.Unlock()
	return fn()
}

// read returns k's object name; an error wrapping backend.ErrNotFound
// when there is none.
func (d *driver) read(k backend.Kind, name string) (object, error) {
	var o object
	if !names.Valid(name) {
		return o, fmt.Errorf("%s %q: %w (not a valid name: %s)", k, name, backend.ErrNotFound, names.Rule)
	}
	b, err := ledger.ReadFile(d.path(k, name), maxObject)
	if errors.Is(err, os.ErrNotExist) {
		return o, fmt.Errorf("%s %s: %w", k, name, backend.ErrNotFound)
	}
	if err != nil {
		return o, fmt.Errorf("%s %s: %w", k, name, err)
	}
	if err := json.Unmarshal(b, &o); err != nil || o.Name != name || o.Kind != k.String() {
		return o, fmt.Errorf("%s %s: its file %s is not one this backend wrote", k, name, d.path(k, name))
	}
	return o, nil
}

// all returns every object of kind k, by name; files it cannot read are
// left out (they are no object of this backend).
func (d *driver) all(k backend.Kind) ([]object, error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("memory backend: %w", err)
	}
	prefix := k.String() + "."
	var out []object
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(n, prefix) || !strings.HasSuffix(n, ".json") {
			continue
		}
		if o, err := d.read(k, strings.TrimSuffix(strings.TrimPrefix(n, prefix), ".json")); err == nil {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// create writes the new object o, journalled first.
func (d *driver) create(k backend.Kind, o object) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	if err := d.log(opCreate, k, o); err != nil {
		return err
	}
	return ledger.WriteFileAtomic(d.path(k, o.Name), b)
}

// delete removes object o, journalled first: a removal is never made
// without its line, whatever kills the process in between.
func (d *driver) delete(k backend.Kind, o object) error {
	if _, err := os.Lstat(d.path(k, o.Name)); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s %s: %w", k, o.Name, backend.ErrNotFound)
	}
	if err := d.log(opRemove, k, o); err != nil {
		return err
	}
	err := os.Remove(d.path(k, o.Name))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s %s: %w", k, o.Name, backend.ErrNotFound)
	}
	return err
}

func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("memory backend: id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func keepAlive(o object) bool {
	return o.KeepAlive != "" || strings.HasPrefix(o.Name, backend.KeepAlivePrefix)
}

// owned is what a removal for runID decides of o, before it is removed:
// nil when it may go.
func (d *driver) owned(k backend.Kind, o object, runID string) error {
	switch {
	case keepAlive(o):
		return fmt.Errorf("%s %s is a keep-alive sandbox: %w", k, o.Name, backend.ErrNotOwned)
	case o.Run == "":
		return fmt.Errorf("%s %s: %w: %w", k, o.Name, backend.ErrNotOwned, backend.ErrUnlabelled)
	case o.Run != runID:
		return fmt.Errorf("%s %s is run %s's: %w", k, o.Name, o.Run, backend.ErrNotOwned)
	}
	if k == backend.NetworkKind {
		return d.inUse(o.Name)
	}
	return nil
}

// inUse is ErrInUse while a sandbox is joined to network name.
func (d *driver) inUse(name string) error {
	sbxs, err := d.all(backend.SandboxKind)
	if err != nil {
		return err
	}
	for _, s := range sbxs {
		if _, ok := s.Networks[name]; ok {
			return fmt.Errorf("network %s: sandbox %s is joined to it: %w", name, s.Name, backend.ErrInUse)
		}
	}
	return nil
}

// each runs fn on each name under the lock, one outcome per name; a lock
// not taken is every name's outcome.
func (d *driver) each(ctx context.Context, list []string, fn func(string) error) []error {
	errs := make([]error, len(list))
	if err := d.locked(ctx, func() error {
		for i, n := range list {
			errs[i] = fn(n)
		}
		return nil
	}); err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// Remove removes, of the objects named, those run runID made.
func (d *driver) Remove(ctx context.Context, k backend.Kind, runID string, list []string) []error {
	return d.each(ctx, list, func(n string) error {
		o, err := d.read(k, n)
		if err != nil {
			return err
		}
		if err := d.owned(k, o, runID); err != nil {
			return err
		}
		return d.delete(k, o)
	})
}

// CheckOwned says what Remove would, and removes nothing.
func (d *driver) CheckOwned(ctx context.Context, k backend.Kind, runID string, list []string) []error {
	return d.each(ctx, list, func(n string) error {
		o, err := d.read(k, n)
		if err != nil {
			return err
		}
		if err := d.owned(k, o, runID); err != nil && !errors.Is(err, backend.ErrInUse) {
			return err
		}
		return nil
	})
}

// ListRun returns the ids of run runID's objects of kind k.
func (d *driver) ListRun(ctx context.Context, k backend.Kind, runID string) ([]string, error) {
	var ids []string
	err := d.locked(ctx, func() error {
		objs, err := d.all(k)
		for _, o := range objs {
			if o.Run == runID && !keepAlive(o) {
				ids = append(ids, o.ID)
			}
		}
		return err
	})
	return ids, err
}

// RemoveIDs removes objects by id; keep-alive sandboxes never.
func (d *driver) RemoveIDs(ctx context.Context, k backend.Kind, ids []string) []error {
	var objs []object
	return d.each(ctx, ids, func(id string) error {
		if objs == nil {
			var err error
			if objs, err = d.all(k); err != nil {
				return err
			}
		}
		for _, o := range objs {
			if o.ID != id {
				continue
			}
			if keepAlive(o) {
				return fmt.Errorf("%s %s is a keep-alive sandbox: %w", k, o.Name, backend.ErrNotOwned)
			}
			if k == backend.NetworkKind {
				if err := d.inUse(o.Name); err != nil {
					return err
				}
			}
			return d.delete(k, o)
		}
		return fmt.Errorf("%s id %s: %w", k, id, backend.ErrNotFound)
	})
}

// CloseRun removes every sandbox, then every network, of run runID.
func (d *driver) CloseRun(ctx context.Context, runID string) ([]string, error) {
	var removed []string
	var errs []error
	for _, k := range []backend.Kind{backend.SandboxKind, backend.NetworkKind} {
		err := d.locked(ctx, func() error {
			objs, err := d.all(k)
			for _, o := range objs {
				if o.Run != runID || keepAlive(o) {
					continue
				}
				if k == backend.NetworkKind {
					if e := d.inUse(o.Name); e != nil {
						errs = append(errs, e)
						continue
					}
				}
				if e := d.delete(k, o); e != nil && !errors.Is(e, backend.ErrNotFound) {
					errs = append(errs, e)
					continue
				}
				removed = append(removed, o.Name)
			}
			return err
		})
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// Create records a sandbox named name. A Spec with testcontainers-go's
// WaitingFor or Customize is refused: nothing runs here to wait for.
func (d *driver) Create(ctx context.Context, name string, spec backend.Spec) (backend.Sandbox, error) {
	if spec.WaitingFor != nil || len(spec.Customize) > 0 {
		return nil, errors.New("memory backend: WaitingFor and Customize are testcontainers-go's; a memory sandbox runs nothing to wait for or customize")
	}
	if len(spec.Volumes) > 0 {
		return nil, errors.New("memory backend: it has no named volumes to mount")
	}
	if spec.Image == "" {
		return nil, errors.New("memory backend: a sandbox needs an image name")
	}
	if !names.Valid(name) {
		return nil, fmt.Errorf("memory backend: sandbox name %q: %s", name, names.Rule)
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	o := object{Kind: backend.SandboxKind.String(), ID: id, Name: name, Run: spec.RunID, KeepAlive: spec.KeepAlive, KeepAliveExtra: spec.KeepAliveExtra,
		Image: spec.Image, Cmd: spec.Cmd, Env: spec.Env, Ports: spec.Ports, Networks: spec.Networks, Labels: origin.FromContext(ctx).AddLabels(maps.Clone(spec.Labels)), Created: time.Now().UTC()}
	for _, f := range spec.Files {
		o.Files = append(o.Files, f.GuestPath)
	}
	err = d.locked(ctx, func() error {
		if _, err := d.read(backend.SandboxKind, name); !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("memory backend: sandbox %s: %w", name, backend.ErrNameTaken)
		}
		for n := range spec.Networks {
			if _, err := d.read(backend.NetworkKind, n); err != nil {
				return fmt.Errorf("memory backend: sandbox %s joins %w", name, err)
			}
		}
		return d.create(backend.SandboxKind, o)
	})
	if err != nil {
		return nil, err
	}
	return &sandbox{d: d, o: o}, nil
}

// Adopt returns the sandbox name; every memory sandbox runs.
func (d *driver) Adopt(ctx context.Context, name string) (backend.Sandbox, error) {
	var o object
	err := d.locked(ctx, func() (err error) {
		o, err = d.read(backend.SandboxKind, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("memory backend: %w", err)
	}
	return &sandbox{d: d, o: o}, nil
}

// CreateNetwork records a network named name, run runID's.
func (d *driver) CreateNetwork(ctx context.Context, name, runID string) (string, error) {
	if !names.Valid(name) {
		return "", fmt.Errorf("memory backend: network name %q: %s", name, names.Rule)
	}
	id, err := newID()
	if err != nil {
		return "", err
	}
	o := object{Kind: backend.NetworkKind.String(), ID: id, Name: name, Run: runID, Labels: origin.FromContext(ctx).Labels(), Created: time.Now().UTC()}
	err = d.locked(ctx, func() error {
		if _, err := d.read(backend.NetworkKind, name); !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("memory backend: network %s: %w", name, backend.ErrNameTaken)
		}
		return d.create(backend.NetworkKind, o)
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// ImageID is a digest of the reference: a memory image never changes.
func (d *driver) ImageID(_ context.Context, ref string) (string, error) {
	sum := sha256.Sum256([]byte(ref))
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// KeepAlives describes every keep-alive sandbox of the folder.
func (d *driver) KeepAlives(ctx context.Context) ([]backend.Description, error) {
	var out []backend.Description
	err := d.locked(ctx, func() error {
		objs, err := d.all(backend.SandboxKind)
		for _, o := range objs {
			if keepAlive(o) {
				out = append(out, d.describe(o))
			}
		}
		return err
	})
	return out, err
}

// RemoveKeepAlive removes keep-alive sandbox name when its mark is
// keepAlive.
func (d *driver) RemoveKeepAlive(ctx context.Context, name, mark string) error {
	return d.locked(ctx, func() error {
		o, err := d.read(backend.SandboxKind, name)
		if err != nil {
			return err
		}
		if o.KeepAlive == "" || o.KeepAlive != mark {
			return fmt.Errorf("sandbox %s is not keep-alive sandbox %s: %w", name, mark, backend.ErrNotOwned)
		}
		return d.delete(backend.SandboxKind, o)
	})
}

func (d *driver) describe(o object) backend.Description {
	id, _ := d.ImageID(context.Background(), o.Image)
	return backend.Description{Name: o.Name, Image: o.Image, ImageID: id, KeepAlive: o.KeepAlive, KeepAliveExtra: o.KeepAliveExtra, Created: o.Created, Running: true}
}

// sandbox is a memory sandbox: a name, an id and its file.
type sandbox struct {
	d *driver
	o object
}

func (s *sandbox) Name() string { return s.o.Name }
func (s *sandbox) ID() string   { return s.o.ID }
func (s *sandbox) Host() string { return "" }

// MappedPort fails: nothing listens in a memory sandbox.
func (s *sandbox) MappedPort(_ context.Context, port string) (string, error) {
	return "", fmt.Errorf("memory sandbox %s: port %s: %w (a memory sandbox runs no process, so it publishes no port)", s.o.Name, port, errors.ErrUnsupported)
}

// Logs is empty: nothing runs to write any.
func (s *sandbox) Logs(context.Context) (string, error) { return "", nil }

// Stop removes the sandbox's file; one already gone counts as stopped.
func (s *sandbox) Stop(ctx context.Context, _ time.Duration) error {
	return s.d.locked(ctx, func() error {
		o, err := s.d.read(backend.SandboxKind, s.o.Name)
		if errors.Is(err, backend.ErrNotFound) || err == nil && o.ID != s.o.ID {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.d.delete(backend.SandboxKind, o); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return err
		}
		return nil
	})
}

// Describe says what the sandbox was created as.
func (s *sandbox) Describe(context.Context) (backend.Description, error) {
	return s.d.describe(s.o), nil
}

var (
	_ backend.Driver           = (*driver)(nil)
	_ backend.RunLister        = (*driver)(nil)
	_ backend.OwnershipChecker = (*driver)(nil)
	_ backend.RunCloser        = (*driver)(nil)
	_ backend.KeepAliver       = (*driver)(nil)
	_ backend.Describer        = (*sandbox)(nil)
)
