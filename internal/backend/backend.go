package backend

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
)

// Errors a removal, a lookup or a create wraps so that callers can tell the
// cases apart with errors.Is. Anything that wraps none of them is a failure
// whose cause is unknown, and the reaper treats the resource as possibly
// alive.
var (
	// ErrNotFound: the engine says nothing of that name exists.
	ErrNotFound = errors.New("not found")
	// ErrNotOwned: something of that name exists, and it is not the run's
	// (it carries no mark of that run, or it is a keep-alive sandbox). It
	// was left alone; its name may leave the run's list.
	ErrNotOwned = errors.New("not this run's")
	// ErrUnlabelled comes with ErrNotOwned when what exists carries no
	// run's mark at all (rather than another run's, or a keep-alive's):
	// the other members of the family do not label their networks.
	ErrUnlabelled = errors.New("it carries no rightsize run label")
	// ErrInUse: a network still has endpoints attached.
	ErrInUse = errors.New("in use")
	// ErrUnreachable: the engine did not answer (no daemon, wrong socket,
	// permission denied on the socket, a call past its deadline).
	ErrUnreachable = errors.New("engine unreachable")
	// ErrStarting: Adopt found a sandbox of that name that is being created
	// or started, by someone else or a process that died doing it.
	ErrStarting = errors.New("being started")
	// ErrStopped: Adopt found a sandbox of that name that has stopped.
	ErrStopped = errors.New("stopped")
	// ErrNameTaken: Create found a sandbox of that name already there.
	ErrNameTaken = errors.New("name already in use")
	// ErrClaimLost: the run's claim on an engine that holds it (a
	// Kubernetes Lease, RunHolder) was deleted or its renewal refused while
	// the run held sandboxes by it, and the engine removes, or may remove,
	// them. A Sandbox's Stop wraps it once the sandbox is confirmed gone:
	// the stop is done, and the test must still hear of it.
	ErrClaimLost = errors.New("the run's claim on the engine was lost while it held its sandboxes")
)

// Names of the backends as the ledger records them.
const (
	Docker = "docker"
	Msb    = "msb"
	// Local: a run of local processes only, in a process with no engine
	// (rightsize-go only; the other members leave a run of a backend they
	// do not know alone).
	Local = "local"
	// Memory: sandboxes that are files of this host and run nothing
	// (backend/memory), for tests with no engine (rightsize-go only).
	Memory = "memory"
	// Kubernetes: pods in one namespace of a cluster (rightsize-go only).
	Kubernetes = "kubernetes"
)

// Labels rightsize puts on what a run creates: the run id, under both
// spellings the family uses (Kotlin and Node write runId, Rust run_id), so
// any member's run-scoped listing finds them, and a removal for a run of
// any member can prove what it removes is that run's.
const (
	LabelRunID    = "dev.rightsize.runId"
	LabelRunIDAlt = "dev.rightsize.run_id"
	// LabelReuse marks a keep-alive sandbox, instead of the run labels.
	LabelReuse = "dev.rightsize.reuse"
	// LabelTest and LabelTestPlace name the test that asked for a
	// sandbox (its t.Name()) and where in its code (file:line); a
	// keep-alive sandbox carries them so that one of the same test, place
	// and image repository made later supersedes it.
	LabelTest      = "dev.rightsize.test"
	LabelTestPlace = "dev.rightsize.test.place"
	// LabelImageRun marks an image a run built, with the run's id, and
	// LabelImage with the ledger line that names it (written before the
	// build, when no id is known). Not the run labels: a container made
	// from the image inherits its labels, and must not look like the run's.
	LabelImageRun = "dev.rightsize.image.runId"
	LabelImage    = "dev.rightsize.image"
	// LabelImageSince is when the run's first build began, by the
	// engine's clock (RFC 3339): the untagged parents its builds made,
	// made since, go with the image.
	LabelImageSince = "dev.rightsize.image.since"
)

// Kind is what a ledger line names; one type with the ledger's and the
// reaper's (internal/names).
type Kind = names.Kind

// The kinds a backend removes. Volumes and images only where the backend
// says so (KindsRemover).
const (
	SandboxKind = names.SandboxKind
	NetworkKind = names.NetworkKind
	VolumeKind  = names.VolumeKind
	ImageKind   = names.ImageKind
)

// KindsRemover is a Backend whose engine holds more kinds than sandboxes
// and networks (Docker's named volumes and images).
type KindsRemover interface {
	Backend
	// Kinds are the kinds it removes, in the order a run is reaped.
	Kinds() []Kind
}

// EngineKinds are the kinds b removes, in the order a run is reaped:
// sandboxes and networks, and what else it says (KindsRemover).
func EngineKinds(b Backend) []Kind {
	if kr, ok := b.(KindsRemover); ok {
		return kr.Kinds()
	}
	return []Kind{SandboxKind, NetworkKind}
}

// Canonical returns the name a recorded backend stands for: "microsandbox"
// (written by the Rust member of the family) is the same backend as "msb".
func Canonical(name string) string { return names.CanonicalBackend(name) }

// KeepAlivePrefix starts the name of every keep-alive sandbox of the
// family; nothing run-scoped ever removes one, whatever a list says.
const KeepAlivePrefix = "rz-reuse-"

// Backend is the part of an engine the reaper needs: who it is, and how to
// remove a run's sandboxes and networks, from this process and from a
// detached watchdog after this process is gone.
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

	// Remove removes, of the sandboxes or networks (k) named, those that
	// belong to run runID, forcefully, and returns one outcome per name in
	// the order given: nil when it is gone; an error wrapping ErrNotFound
	// when nothing of that name existed; ErrNotOwned when something of that
	// name exists that the engine does not show as runID's (it is left
	// alone, as is every keep-alive sandbox); ErrInUse for a network with
	// endpoints; any other error when it may still exist. A backend whose
	// engine keeps no marks (msb) removes by name, keep-alive names aside.
	Remove(ctx context.Context, k Kind, runID string, names []string) []error

	// Watchdog says how a watchdog removes this process's sandboxes and
	// networks once the process is gone. An error means none can (the
	// engine's command line is missing and no native watchdog exists): the
	// sweep of the next process is then the only backstop.
	Watchdog(runID string) (WatchdogPlan, error)
}

// RunLister is a Backend whose engine marks what a run creates (Docker's
// labels): the reaper and the native watchdog find a run's sandboxes and
// networks by that mark, which also catches a create the engine finished
// after its owner died, and remove what the owner told them by id.
type RunLister interface {
	Backend
	// ListRun returns the ids of the sandboxes or networks marked as run
	// runID's; keep-alive sandboxes are never among them.
	ListRun(ctx context.Context, k Kind, runID string) ([]string, error)
	// RemoveIDs forcefully removes sandboxes or networks by the engine's
	// own ids, which the run itself got back from its creates: one outcome
	// per id, as Remove.
	RemoveIDs(ctx context.Context, k Kind, ids []string) []error
}

// UnlabelledRemover is a Backend that can remove, by name, networks that
// carry no run label at all: the family makes its networks without one.
// For a run whose networks Go removes itself (the systemf member's, reaped
// whole), the proof that a network is the run's is its name, listed by
// the run, and its age: made no earlier than the run's owner started.
type UnlabelledRemover interface {
	Backend
	// RemoveUnlabelled removes, of the networks named, those that carry
	// run runID's label and those that carry no run label at all and were
	// created at since or later, with one outcome per name as Remove's. A
	// network of that name made before since, or labelled for another run,
	// is left alone: ErrNotOwned.
	RemoveUnlabelled(ctx context.Context, runID string, names []string, since time.Time) []error
}

// EngineFinder is a Backend that knows the other engines of its kind a
// process may reach: where a run of another member, which records no
// engine, may have put its sandboxes.
type EngineFinder interface {
	Backend
	// OtherEngines returns those engines, this one aside, each as
	// OpenEndpoint takes it; and the ones known of that cannot be asked
	// from here, each with why.
	OtherEngines() (hosts, unasked []string)
}

// RunHolder is a Backend whose engine keeps a run's sandboxes and networks
// only while a claim of the run is renewed (a Kubernetes Lease that owns
// them): the native watchdog holds the claim while the owner lives and
// drops it once the owner is gone, and the engine removes the rest.
type RunHolder interface {
	Backend
	// HoldRun renews run runID's claim until ctx ends.
	HoldRun(ctx context.Context, runID string)
	// DropRun gives run runID's claim up: nil when it is gone, or never
	// was. With owner not 0, only a claim that process of this machine
	// made is dropped, and only as read (not renewed since): a sweep's
	// judgement of death is of the process its ledger records, and a
	// claim made or renewed by another is left to lapse.
	DropRun(ctx context.Context, runID string, owner int) error
}

// LapseSweeper is a Backend whose engine holds each run's claim (RunHolder):
// a run whose claim lapsed is dead wherever its owner ran, and a sweep from
// any machine, with or without the run in its ledger, drops it.
type LapseSweeper interface {
	Backend
	// SweepLapsed drops the claims of this engine's runs that lapsed
	// before now (a dry run only finds them), and returns those runs'
	// ids. A claim that is not provably a run's is never touched.
	SweepLapsed(ctx context.Context, now time.Time, dryRun bool) (runs []string, err error)
}

// ClaimLister is a LapseSweeper that shows every run claim its engine
// holds, each judged as SweepLapsed judges it: for a listing
// (rightsize ls), never a second copy of the sweep's decisions.
type ClaimLister interface {
	LapseSweeper
	// Claims returns the claims that carry a run's mark, judged at now,
	// sorted by name.
	Claims(ctx context.Context, now time.Time) ([]Claim, error)
}

// ClaimState is what a sweep makes of a claim.
type ClaimState string

// The states of a claim.
const (
	// ClaimHeld: renewed within its duration; its run is alive.
	ClaimHeld ClaimState = "held"
	// ClaimLapsed: nobody renewed it for its duration; its run is dead,
	// and a sweep drops it.
	ClaimLapsed ClaimState = "lapsed"
	// ClaimUnjudged: a run's, saying no renewal or no duration; never
	// judged lapsed.
	ClaimUnjudged ClaimState = "unjudged"
	// ClaimNotARun: it carries a run's mark but is not provably a run's
	// claim (its name and marks disagree); never touched, however stale.
	ClaimNotARun ClaimState = "not a run's"
)

// Claim is a run's claim as the engine holds it (a Kubernetes Lease),
// judged at one time.
type Claim struct {
	// Name is the engine's name of it.
	Name string
	// Run is the run it provably is; "" for ClaimNotARun.
	Run string
	// Holder is who last took or renewed it, as it says ("host/pid").
	Holder string
	// Renewed is when it was last renewed, by the holder's clock; zero
	// when it says none. Duration is how long a renewal holds; 0 when it
	// says none.
	Renewed  time.Time
	Duration time.Duration
	// Lapsed: it says when it was renewed and for how long, and that time
	// is past, whoever's it is. Only a run's is dropped (State).
	Lapsed bool
	State  ClaimState
	// Reason says why that state, for people.
	Reason string
}

// Expires is when the claim lapses unless renewed; zero when it says no
// renewal or duration.
func (c Claim) Expires() time.Time {
	if c.Renewed.IsZero() || c.Duration <= 0 {
		return time.Time{}
	}
	return c.Renewed.Add(c.Duration)
}

// RunFinder is a RunLister that also names what it finds: for a leak
// check's list.
type RunFinder interface {
	RunLister
	FindRun(ctx context.Context, k Kind, runID string) ([]Found, error)
}

// Found is a sandbox or network of a run, as the engine shows it.
type Found struct {
	ID, Name string
	// Origin is what made it, as its labels say.
	Origin origin.Origin
	// Leaving: a sandbox that stopped and that the engine removes by
	// itself (auto-remove, `docker run --rm`), or is removing: on its
	// way out, not left behind.
	Leaving bool
}

// OwnershipChecker is a Backend that can tell, without touching anything,
// what Remove would decide of each name: a dry run makes the real
// decision.
type OwnershipChecker interface {
	Backend
	// CheckOwned returns one outcome per name, as Remove would, having
	// only looked: nil when Remove would ask the engine to remove it
	// (a network may yet prove in use), ErrNotFound, ErrNotOwned (with
	// ErrUnlabelled), or any other error when the lookup failed.
	CheckOwned(ctx context.Context, k Kind, runID string, names []string) []error
}

// WatchdogPlan is what a run's watchdog needs of the backend: the
// watchdog is always this program re-executed (internal/reaper,
// WatchdogMain), speaking the engine's API.
type WatchdogPlan struct {
	// Env is added to the watchdog's environment (KEY=VALUE), so that it
	// reaches the same engine as this process (DOCKER_HOST and friends,
	// MSB_PATH, RIGHTSIZE_BACKEND).
	Env []string
	// Hold: the backend is a RunHolder, whose claim the watchdog renews
	// while the owner lives, so the watchdog must itself run from the
	// start (the native one), not only at the owner's death.
	Hold bool
	// ProcessesOnly: a native watchdog for the run's local processes
	// alone, which opens no engine (the main watchdog is a script).
	ProcessesOnly bool
}

// Spec describes a sandbox to create. The caller (the reaper's session for
// package sandboxtest) has chosen the name.
type Spec struct {
	Image string
	// Cmd replaces the image's command; nil keeps it.
	Cmd []string
	Env map[string]string
	// Ports to publish, as "8080/tcp" or "8080" (tcp). They are published
	// where this process reaches them (Driver.Host), on a random port.
	Ports []string
	// Networks to join, by name, with the aliases to use on each.
	Networks map[string][]string
	// Labels are the user's own; the backend adds its marks to them.
	Labels map[string]string
	// RunID marks the sandbox as that run's, so that only a removal for that
	// run removes it. Empty for a keep-alive sandbox.
	RunID string
	// KeepAlive marks a keep-alive sandbox (the 12 hex digits of its
	// identity): no run-scoped removal ever touches it.
	KeepAlive string
	// KeepAliveExtra is rightsize-go's own mark of what a keep-alive
	// sandbox's family identity cannot see (labels, customizers, file
	// modes, a ReuseKey): a sandbox whose mark differs is another one.
	KeepAliveExtra string
	// Test and TestPlace are the test that asked for the sandbox and the
	// place in its code (LabelTest, LabelTestPlace); empty when unknown.
	Test, TestPlace string
	// MemoryLimitMB limits the sandbox's memory; 0 means no limit.
	MemoryLimitMB int
	// Files are copied into the sandbox before it starts.
	Files []File
	// Volumes are named volumes of the run (VolumeCreator) to mount; a
	// backend that has none refuses a Spec that sets them.
	Volumes []VolumeMount
	// WaitingFor and Customize are testcontainers-go's, for the Docker
	// backend; another backend refuses a Spec that sets them.
	WaitingFor wait.Strategy
	Customize  []testcontainers.ContainerCustomizer
}

// File is content copied into a sandbox at GuestPath.
type File struct {
	GuestPath string
	Content   []byte
	// Mode defaults to 0644.
	Mode int64
}

// VolumeMount mounts the named volume Name at Path in a sandbox.
type VolumeMount struct {
	Name, Path string
	ReadOnly   bool
}

// VolumeCreator is a Driver whose engine has named volumes: it creates
// one marked as run runID's (removed by Remove with VolumeKind, which
// checks the mark) and returns the engine's id for it.
type VolumeCreator interface {
	CreateVolume(ctx context.Context, name, runID string) (id string, err error)
}

// Build is an image to build: the folder Dir as the build's context
// (less what its .dockerignore names), with the Dockerfile at Dockerfile
// in it ("Dockerfile" when empty) and the build arguments Args.
type Build struct {
	Dir, Dockerfile string
	Args            map[string]string
}

// ImageBuilder is a Driver whose engine builds images: it builds b tagged
// name, marked as run runID's under the ledger line name (LabelImageRun,
// LabelImage; removed by Remove with ImageKind, which checks the marks),
// and returns name.
type ImageBuilder interface {
	BuildImage(ctx context.Context, name, runID string, b Build) (string, error)
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
	// the sandbox is confirmed gone (a sandbox that was already gone counts),
	// or an error wrapping ErrClaimLost when it is gone but the engine may
	// have removed it before: the caller forgets it, and says so.
	Stop(ctx context.Context, grace time.Duration) error
}

// Description is what an engine says of a sandbox, for keep-alive reuse
// and housekeeping.
type Description struct {
	Name string
	// Image is the reference it was created from; ImageID the engine's id
	// of the image it runs.
	Image, ImageID string
	// KeepAlive and KeepAliveExtra are its keep-alive marks (Spec).
	KeepAlive, KeepAliveExtra string
	// Test and TestPlace are the test that asked for it (Spec), where
	// the engine keeps them.
	Test, TestPlace string
	Created         time.Time
	Running         bool
}

// Describer is a Sandbox that can say what it is.
type Describer interface {
	Describe(ctx context.Context) (Description, error)
}

// KeepAliver is a Driver that can tell what an image reference resolves
// to now, and list and remove keep-alive sandboxes, which nothing
// run-scoped may touch.
type KeepAliver interface {
	// ImageID is the engine's id of the image ref names now.
	ImageID(ctx context.Context, ref string) (string, error)
	// KeepAlives describes every keep-alive sandbox on the engine.
	KeepAlives(ctx context.Context) ([]Description, error)
	// RemoveKeepAlive forcefully removes the keep-alive sandbox name, and
	// only when it is one (its keep-alive mark is keepAlive): ErrNotOwned
	// otherwise, ErrNotFound when there is none.
	RemoveKeepAlive(ctx context.Context, name, keepAlive string) error
}

// Container is a Sandbox backed by a testcontainers-go container, for what
// rightsize does not wrap.
type Container interface {
	Sandbox
	Container() testcontainers.Container
}

// Execer is a Sandbox that runs commands inside itself, tied to this
// process's life (see ExecOptions).
type Execer interface {
	Exec(ctx context.Context, cmd []string, opt ExecOptions) (ExecResult, error)
}

// ExecOptions tunes Exec. The zero value runs the command as the
// sandbox's user, in its working directory, under the stdin lease: the
// command ends when this process dies, however it dies.
type ExecOptions struct {
	// Stdin, when set, is copied to the command's standard input, and closed
	// once it is drained. The stdin then carries data instead of the lease:
	// the command is NOT ended when this process dies; only a context that
	// ends, or a caller that outlives it, ends it.
	Stdin io.Reader
	// Env is added to the sandbox's environment, as KEY=VALUE.
	Env []string
	// WorkingDir is where the command starts; "" keeps the sandbox's.
	WorkingDir string
	// User runs the command as another user ("nobody", "1000:1000").
	User string
	// OutputLimit bounds what is kept of each of stdout and stderr, in
	// bytes; 0 or less means DefaultExecOutputLimit.
	OutputLimit int
	// Started, when set, is called with the engine's id of the command
	// once the engine has it, before the command runs.
	Started func(id string)
}

// DefaultExecOutputLimit bounds what Exec keeps of each of stdout and
// stderr when ExecOptions.OutputLimit is 0.
const DefaultExecOutputLimit = 1 << 20

// ExecGrace is how long a command whose lease ended has between SIGTERM
// and SIGKILL: long enough for an EXIT trap or a flush, short enough that
// a dead owner's work stops within seconds.
const ExecGrace = 2 * time.Second

// ExecResult is how an exec ended and what it wrote.
type ExecResult struct {
	// ExitCode is the command's own code when it exited by itself (128+n
	// when a signal n it did not ask for killed it, 127 when it could not be
	// found), 143 or 137 when the lease ended it.
	ExitCode int
	// Interrupted is non-nil when the context ended while the command ran,
	// and the command was ended for that reason: context.Cause of the
	// context.
	Interrupted error
	// Stdout and Stderr hold at most the output limit each; past it the
	// rest is read and discarded, and the matching Truncated flag is set.
	Stdout, Stderr                   []byte
	StdoutTruncated, StderrTruncated bool
	// PGID is the command's process group inside the sandbox; 0 when the
	// command never started.
	PGID int
}

// Errors Exec wraps when the sandbox cannot run the lease wrapper.
var (
	ErrNoShell  = errors.New("the sandbox image has no /bin/sh; Exec needs a POSIX shell and setsid — busybox is enough")
	ErrNoSetsid = errors.New("the sandbox image has a shell but no setsid; Exec needs it to give the command a process group of its own — busybox is enough")
)

// Driver is a Backend that can also create sandboxes and networks. What
// it creates carries the origin (which test made it) that the create's
// context carries (origin.NewContext), where its engine keeps labels.
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
	// CreateNetwork creates a network named name, marked as run runID's,
	// and returns the engine's id for it.
	CreateNetwork(ctx context.Context, name, runID string) (id string, err error)
	// Host is where this process reaches the ports sandboxes publish.
	Host() string
	// Close releases the driver's connections. It removes nothing.
	Close() error
}

// RunCloser is a Driver that can remove everything marked as a run's,
// listed in the ledger or not: what the end of a TestMain does.
type RunCloser interface {
	CloseRun(ctx context.Context, runID string) (removed []string, err error)
}

// RunLabeler is a Driver that decides the labels of what a run creates:
// the one place they are decided, which every path that creates for the
// run uses (Create, Track, a network, the guard of every create), so that
// everything of a run carries the same marks.
type RunLabeler interface {
	RunLabels(runID string) map[string]string
}

// Tracker is a Driver that can take a testcontainers-go request someone
// else will create (sandboxtest.Track) as the run's sandbox name, made by
// o: named, marked, its ports published where this process reaches them.
type Tracker interface {
	Track(req *testcontainers.GenericContainerRequest, name, runID string, o origin.Origin) (Sandbox, error)
}

// DefaultStopGrace is how long Stop waits after SIGTERM before it removes a
// sandbox by force, unless the caller has less time.
const DefaultStopGrace = 2 * time.Second
