package backend

import (
	"context"
	"errors"
	"time"

	"github.com/rightsize/rightsize-go/internal/names"
)

// Errors a removal or a lookup wraps so that callers can tell the cases
// apart with errors.Is. Anything that wraps none of them is a failure whose
// cause is unknown, and the reaper treats the resource as possibly alive.
var (
	// ErrNotFound: the engine says no sandbox or network of that name exists.
	ErrNotFound = errors.New("not found")
	// ErrInUse: a network still has endpoints attached.
	ErrInUse = errors.New("in use")
	// ErrUnreachable: the engine did not answer (no daemon, wrong socket,
	// permission denied on the socket).
	ErrUnreachable = errors.New("engine unreachable")
	// ErrStarting: Adopt found a sandbox of that name that is being created
	// or started, by someone else or a process that died doing it.
	ErrStarting = errors.New("being started")
	// ErrStopped: Adopt found a sandbox of that name that has stopped.
	ErrStopped = errors.New("stopped")
	// ErrNameTaken: Create found a sandbox of that name already there.
	ErrNameTaken = errors.New("name already in use")
)

// Names of the backends as the ledger records them.
const (
	Docker = "docker"
	Msb    = "msb"
)

// Canonical returns the name a recorded backend stands for: "microsandbox"
// (written by the Rust member of the family) is the same backend as "msb".
// The rule is the family's, the ledger's too (internal/names).
func Canonical(name string) string { return names.CanonicalBackend(name) }

// Backend is the part of an engine the reaper needs: who it is, and how to
// remove sandboxes and networks by name, both from this process and from a
// detached watchdog script after this process is gone.
type Backend interface {
	// Name is the backend as recorded in a run's record: Docker or Msb.
	Name() string

	// Endpoint names the engine instance this backend talks to, such as
	// "unix:///var/run/docker.sock" or "tcp://127.0.0.1:2376". Runs recorded
	// against another endpoint are never reaped through this one. The empty
	// string means the backend has no notion of an endpoint.
	Endpoint() string

	// DefaultEndpoint reports whether Endpoint is the engine a process with
	// no configuration reaches. The other members of the family record no
	// endpoint; their runs are reaped only through such a backend, since
	// through another engine every name would answer "not found" and be
	// forgotten while it still runs. A backend without endpoints says true.
	DefaultEndpoint() bool

	// RemoveSandboxes forcefully removes the named sandboxes and returns one
	// outcome per name, in the order given: nil when the sandbox is gone, an
	// error wrapping ErrNotFound when none of that name existed, any other
	// error when it may still exist.
	RemoveSandboxes(ctx context.Context, names []string) []error

	// RemoveNetworks removes the named networks, with one outcome per name:
	// nil, ErrNotFound, ErrInUse (endpoints still attached), or another error.
	RemoveNetworks(ctx context.Context, names []string) []error

	// WatchdogPlan says how a detached shell script removes this process's
	// sandboxes and networks once the process is gone. An error means no
	// watchdog can work for this backend (its command line is missing, say);
	// the sweep of the next process is then the only backstop.
	WatchdogPlan() (WatchdogPlan, error)
}

// WatchdogPlan is what the watchdog script runs, as data: nothing in it is
// ever evaluated by a shell, every word reaches the command as one argument.
type WatchdogPlan struct {
	// Steps run in order, sandboxes first, then networks.
	Steps []WatchdogStep
	// Env is added to the watchdog's environment (KEY=VALUE), so that its
	// commands reach the same engine as this process (DOCKER_HOST and
	// friends, MSB_PATH).
	Env []string
}

// WatchdogStep is one removal command applied to the names of one list.
type WatchdogStep struct {
	// List is "sandboxes" or "networks": which line file the names come from.
	List string
	// Batch runs Command once with every name appended; when that call
	// fails, the step is repeated one name at a time so each outcome is
	// known. Without Batch the command runs once per name.
	Batch bool
	// Gone lists output fragments (fixed strings) that, in the output of a
	// failed call, mean the name does not exist: it counts as removed.
	Gone []string
	// Retry lists output fragments that mean a transient failure: the call
	// is repeated once after 500 ms.
	Retry []string
	// Command is the program (an absolute path) and its leading arguments;
	// the names are appended.
	Command []string
}

// Spec describes a sandbox to create. The caller (package sandboxtest) has
// already chosen the name and the labels.
type Spec struct {
	Image string
	// Cmd replaces the image's command; nil keeps it.
	Cmd []string
	Env map[string]string
	// Ports to publish, as "8080/tcp" or "8080" (tcp). They are published on
	// the loopback address of the engine's host, on a random port.
	Ports []string
	// Networks to join, by name, with the aliases to use on each.
	Networks map[string][]string
	Labels   map[string]string
	// MemoryLimitMB limits the sandbox's memory; 0 means no limit.
	MemoryLimitMB int
	// Files are copied into the sandbox before it starts.
	Files []File
}

// File is content copied into a sandbox at GuestPath.
type File struct {
	GuestPath string
	Content   []byte
	Mode      int64
}

// Sandbox is a running sandbox created or adopted by a Driver.
type Sandbox interface {
	Name() string
	// ID is the engine's own identifier (the container id for Docker).
	ID() string
	// Host is where published ports are reached from this process.
	Host() string
	// MappedPort returns the host port a guest port ("8080/tcp") is published on.
	MappedPort(ctx context.Context, port string) (string, error)
	// Logs returns what the sandbox wrote so far, stdout and stderr.
	Logs(ctx context.Context) (string, error)
	// Stop asks the sandbox's main process to end (SIGTERM), waits at most
	// grace, then removes the sandbox forcefully. It returns nil only when
	// the sandbox is confirmed gone (a sandbox that was already gone counts).
	Stop(ctx context.Context, grace time.Duration) error
}

// Driver is a Backend that can also create sandboxes and networks.
type Driver interface {
	Backend
	// Create creates and starts a sandbox named name. On error, a sandbox of
	// that name may or may not exist: the caller removes it by name. The
	// error wraps ErrNameTaken when one of that name was already there.
	Create(ctx context.Context, name string, spec Spec) (Sandbox, error)
	// Adopt returns the running sandbox of that name, or an error wrapping
	// ErrNotFound when there is none running; it wraps ErrStarting as well
	// when one of that name is being created or started, ErrStopped when
	// one has stopped.
	Adopt(ctx context.Context, name string) (Sandbox, error)
	// CreateNetwork creates a network named name with the given labels.
	CreateNetwork(ctx context.Context, name string, labels map[string]string) error
	// Close releases the driver's connections. It removes nothing.
	Close() error
}

// DefaultStopGrace is how long Stop waits after SIGTERM before it removes a
// sandbox by force, unless the caller has less time.
const DefaultStopGrace = 2 * time.Second
