package msb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// EnvPath names the msb binary to use; when unset or empty, msb is looked
// up on PATH. The rest of the rightsize family reads the same variable.
const EnvPath = "MSB_PATH"

// EnvHome is msb's own: the folder of its state (its database, images and
// sandboxes), ~/.microsandbox when unset. Sandboxes of one home are not
// seen through another, so it is this backend's endpoint.
const EnvHome = "MSB_HOME"

func init() {
	backend.Register(backend.Msb, Open)
	// The watchdog opens its backend by endpoint; msb's is in the
	// environment the watchdog inherits (MSB_PATH, MSB_HOME).
	backend.RegisterEndpoint(backend.Msb, func(string) (backend.Driver, error) { return open() })
}

// Driver drives one msb binary. It is safe for concurrent use.
type Driver struct {
	path string
	// home is MSB_HOME made absolute, "" when unset: msb's default home.
	home string

	mu sync.Mutex
	// live holds the sandboxes this process started and has not yet seen
	// removed, by name, so that a removal by name also ends the attached
	// `msb run` this process holds for it.
	live map[string]*sandbox
}

var _ backend.Driver = (*Driver)(nil)

// Open finds the msb binary (MSB_PATH, else PATH) and returns a Driver for
// it. It runs nothing. When no binary is found the error wraps
// backend.ErrUnreachable and says what was looked up and how to fix it.
func Open(_ context.Context) (backend.Driver, error) {
	return open()
}

func open() (*Driver, error) {
	path, err := findMsb()
	if err != nil {
		return nil, err
	}
	home := os.Getenv(EnvHome)
	if home != "" {
		if home, err = filepath.Abs(home); err != nil {
			return nil, fmt.Errorf("msb backend: %s: %v", EnvHome, err)
		}
	}
	return &Driver{path: path, home: home, live: map[string]*sandbox{}}, nil
}

const installHint = "install microsandbox (https://docs.microsandbox.dev; `curl -fsSL https://install.microsandbox.dev | sh`) or set " + EnvPath + " to the absolute path of an msb binary"

func findMsb() (string, error) {
	if v := os.Getenv(EnvPath); v != "" {
		abs, err := filepath.Abs(v)
		if err != nil {
			return "", fmt.Errorf("msb backend: %s=%q: %v; set it to the absolute path of an msb binary: %w", EnvPath, v, err, backend.ErrUnreachable)
		}
		fi, err := os.Stat(abs)
		switch {
		case err != nil:
			return "", fmt.Errorf("msb backend: %s=%q names no usable file (%v); %s: %w", EnvPath, v, err, installHint, backend.ErrUnreachable)
		case fi.IsDir():
			return "", fmt.Errorf("msb backend: %s=%q is a directory, not the msb binary; %s: %w", EnvPath, v, installHint, backend.ErrUnreachable)
		case runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0:
			return "", fmt.Errorf("msb backend: %s=%q is not executable (mode %v); chmod +x it, or %s: %w", EnvPath, v, fi.Mode().Perm(), installHint, backend.ErrUnreachable)
		}
		return abs, nil
	}
	p, err := exec.LookPath("msb")
	if err != nil {
		if errors.Is(err, exec.ErrDot) {
			return "", fmt.Errorf("msb backend: %s is not set, and the only msb on PATH is relative to the current directory (%v), which is refused; %s: %w", EnvPath, err, installHint, backend.ErrUnreachable)
		}
		return "", fmt.Errorf("msb backend: no msb binary: %s is not set and msb is not on PATH (%v); %s: %w", EnvPath, err, installHint, backend.ErrUnreachable)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("msb backend: %s: %v: %w", p, err, backend.ErrUnreachable)
	}
	return abs, nil
}

// Name is backend.Msb.
func (d *Driver) Name() string { return backend.Msb }

// Endpoint is msb's home: "" for the default one (~/.microsandbox, where
// the other members of the family leave theirs), else "MSB_HOME=<path>".
// msb has no daemon; a run recorded against one home is never swept
// through another, where each of its names would answer "not found".
func (d *Driver) Endpoint() string {
	if d.home == "" {
		return ""
	}
	return EnvHome + "=" + d.home
}

// DefaultEndpoint reports whether this is msb's default home.
func (d *Driver) DefaultEndpoint() bool { return d.home == "" }

// MsbPath is the absolute path of the msb binary this driver runs, as the
// ledger records it in a run's record (msbPath).
func (d *Driver) MsbPath() string { return d.path }

// Close releases nothing and removes nothing: the attached `msb run`
// processes are the sandboxes' own supervisors and end with them.
func (d *Driver) Close() error { return nil }

// Host is where sandboxes' published ports are reached: msb publishes on
// this machine's loopback.
func (d *Driver) Host() string { return loopback }

// CreateNetwork always fails: msb has no network objects (the family
// emulates aliases with exec tunnels instead, which rightsize-go does not).
func (d *Driver) CreateNetwork(ctx context.Context, name, runID string) (string, error) {
	return "", fmt.Errorf("msb backend: cannot create network %q: networks are not supported on msb (use RIGHTSIZE_BACKEND=docker for tests that need one): %w", name, errors.ErrUnsupported)
}

// Watchdog: the watchdog runs the same msb on the same home. The names
// the owner told it, before each create, are what it removes (through
// Remove: the label check, then stop and rm).
func (d *Driver) Watchdog(runID string) (backend.WatchdogPlan, error) {
	if d.path == "" || !filepath.IsAbs(d.path) {
		return backend.WatchdogPlan{}, fmt.Errorf("msb backend: no absolute msb path for the watchdog (have %q)", d.path)
	}
	env := []string{EnvPath + "=" + d.path, backend.EnvBackend + "=" + backend.Msb}
	if d.home != "" {
		env = append(env, EnvHome+"="+d.home)
	}
	return backend.WatchdogPlan{Env: env}, nil
}

// Remove removes, of the named sandboxes, those that are run runID's, one
// after the other, with one outcome per name: nil when msb removed it (a
// stop, best effort, then rm), an error wrapping backend.ErrNotFound when
// msb says there is none of that name, backend.ErrNotOwned when it is
// another's, any other error (quoting msb) when it may still exist.
//
// Whose a sandbox is, its labels say (`msb inspect`), by the rule the
// docker backend follows (backend.NotOwnedWhy): one labelled with run
// runID is removed; one labelled with another run, and every keep-alive
// sandbox, is left. One with no run label at all is removed by its name,
// as listed: the other members of the family make their msb sandboxes
// without labels. Between the look and the removal msb has no id to hold
// on to: a name changing hands in between (it holds the run's id) is not
// guarded against.
//
// Networks do not exist on msb: every network name is reported removed, so
// that a ledger line naming one does not stay for ever.
func (d *Driver) Remove(ctx context.Context, k backend.Kind, runID string, names []string) []error {
	return d.eachOwned(ctx, k, runID, names, d.remove)
}

// CheckOwned is what Remove would decide, having only looked.
func (d *Driver) CheckOwned(ctx context.Context, k backend.Kind, runID string, names []string) []error {
	return d.eachOwned(ctx, k, runID, names, nil)
}

// eachOwned checks each name as Remove does, and runs then (when not nil)
// on those that are run runID's.
func (d *Driver) eachOwned(ctx context.Context, k backend.Kind, runID string, names []string, then func(context.Context, string) error) []error {
	out := make([]error, len(names))
	if k != backend.SandboxKind {
		return out
	}
	for i, name := range names {
		if runID == "" {
			out[i] = errors.New("msb: remove: no run id to check ownership against")
			continue
		}
		if out[i] = checkName(name); out[i] != nil {
			continue
		}
		if out[i] = d.owned(ctx, runID, name); out[i] == nil && then != nil {
			out[i] = then(ctx, name)
		}
	}
	return out
}

// owned is nil when the sandbox name is run runID's to remove, by its
// labels, or by its name when it carries no run label.
func (d *Driver) owned(ctx context.Context, runID, name string) error {
	info, err := d.inspect(ctx, name)
	if err != nil {
		return err
	}
	switch why := backend.NotOwnedWhy(runID, name, info.labels); why {
	case "", backend.UnlabelledWhy:
		return nil
	default:
		return fmt.Errorf("msb sandbox %s: %w: %s", name, backend.ErrNotOwned, why)
	}
}

func (d *Driver) remove(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	// Forcefully, as a removal is (docker's rm -f): a graceful stop of a
	// sandbox msb is still booting waits for the boot.
	stop := d.runRetrying(ctx, stopArgs(0, name)...)
	if s := d.tracked(name); s != nil {
		// msb stop ends the attached supervisor; a stop that failed leaves
		// it running, and killing it stops the VM so that rm can proceed.
		s.release(backend.DefaultStopGrace)
	}
	rm := d.runRetrying(ctx, "rm", name)
	switch {
	case rm.err == nil:
		d.gone(name)
		return nil
	case rm.notFound():
		d.gone(name)
		return fmt.Errorf("msb sandbox %s: %w", name, backend.ErrNotFound)
	case stop.err != nil && !stop.notFound():
		return fmt.Errorf("msb sandbox %s may still exist: %w (after stop failed: %v)", name, rm.failure(), stop.failure())
	default:
		return fmt.Errorf("msb sandbox %s may still exist: %w", name, rm.failure())
	}
}

// gone marks this process's sandbox of that name, if any, as removed.
func (d *Driver) gone(name string) {
	d.mu.Lock()
	s := d.live[name]
	delete(d.live, name)
	d.mu.Unlock()
	if s != nil {
		s.markGone()
	}
}

func (d *Driver) tracked(name string) *sandbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live[name]
}

// claim records s as this process's sandbox of its name, unless another
// one is already recorded.
func (d *Driver) claim(s *sandbox) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, dup := d.live[s.name]; dup {
		return fmt.Errorf("msb: sandbox %s was already started by this process", s.name)
	}
	d.live[s.name] = s
	return nil
}

// forget drops the record of name; when only is not nil, only if it is
// still the recorded sandbox.
func (d *Driver) forget(name string, only *sandbox) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if only == nil || d.live[name] == only {
		delete(d.live, name)
	}
}
