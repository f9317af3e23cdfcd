package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// Opener opens a Driver for one backend. It returns an error wrapping
// ErrUnreachable when the engine does not answer.
type Opener func(ctx context.Context) (Driver, error)

// EndpointOpener opens a Driver for one given engine endpoint without
// asking the engine anything (a native watchdog, at its spawn).
type EndpointOpener func(endpoint string) (Driver, error)

var (
	registryMu sync.Mutex
	registry   = map[string]Opener{}
	byEndpoint = map[string]EndpointOpener{}
	// awaiting holds, by backend name, what waits for that backend to
	// become openable by endpoint (WhenEndpoint).
	awaiting = map[string]func(){}
)

// RegisterEndpoint makes a backend openable by endpoint (OpenEndpoint),
// then runs what WhenEndpoint left waiting for it.
func RegisterEndpoint(name string, open EndpointOpener) {
	registryMu.Lock()
	byEndpoint[name] = open
	f := awaiting[name]
	delete(awaiting, name)
	registryMu.Unlock()
	if f != nil {
		f()
	}
}

// WhenEndpoint runs f as soon as backend name can be opened by endpoint:
// now when it can (and reports true), else from within RegisterEndpoint's
// call for it. A backend registers from its package's init, and Go
// initializes a package after all it imports but in no set order beside
// the packages that do not import it: a program re-executed as its own
// watchdog (package reaper) may reach its entry in sandboxtest's init
// before the backend it needs has registered, as backend/kubernetes does
// in a user's test binary. A backend that has registered without an
// endpoint opener never gets one: f runs at once (and OpenEndpoint tells
// it so). One waiter per name: a second replaces the first.
func WhenEndpoint(name string, f func()) (now bool) {
	name = Canonical(name)
	registryMu.Lock()
	if byEndpoint[name] != nil || registry[name] != nil {
		registryMu.Unlock()
		f()
		return true
	}
	awaiting[name] = f
	registryMu.Unlock()
	return false
}

// OpenEndpoint opens backend name for the engine at endpoint.
func OpenEndpoint(name, endpoint string) (Driver, error) {
	registryMu.Lock()
	open := byEndpoint[Canonical(name)]
	registryMu.Unlock()
	if open == nil {
		return nil, fmt.Errorf("backend %q cannot be opened by endpoint in this program", name)
	}
	return open(endpoint)
}

// Register makes a backend available to Resolve under name. Sub-packages
// call it from init; registering the same name twice panics, as it is a
// programming error caught by any test.
func Register(name string, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("backend: " + name + " registered twice")
	}
	registry[name] = open
}

func opener(name string) (Opener, []string) {
	registryMu.Lock()
	defer registryMu.Unlock()
	known := make([]string, 0, len(registry))
	for n := range registry {
		known = append(known, n)
	}
	sort.Strings(known)
	return registry[name], known
}

// EnvBackend is the environment variable that chooses the backend.
const EnvBackend = "RIGHTSIZE_BACKEND"

// Requested returns the backend RIGHTSIZE_BACKEND asks for ("" when unset),
// trimmed, lower-cased, with "microsandbox" read as "msb".
func Requested() string {
	return Canonical(strings.ToLower(strings.TrimSpace(os.Getenv(EnvBackend))))
}

// ResolveTimeout bounds Resolve: an engine that takes connections and never
// answers costs a test process (or the command line) this, far below any
// `go test -timeout`, and then a clear error. A pull of an image the
// engine answered that it lacks (Ryuk's) is not counted.
const ResolveTimeout = 15 * time.Second

// Resolve opens the backend this process uses: the one RIGHTSIZE_BACKEND
// names, else Docker, within ResolveTimeout. The error says what was tried
// and how to fix it.
func Resolve(ctx context.Context) (Driver, error) {
	name := Requested()
	chosen := name != ""
	if !chosen {
		name = Docker
	}
	open, known := opener(name)
	if open == nil {
		if chosen && name == Kubernetes {
			return nil, fmt.Errorf("%s=%q: the kubernetes backend is not linked into this binary (import _ \"github.com/rightsize/rightsize-go/backend/kubernetes\")", EnvBackend, os.Getenv(EnvBackend))
		}
		if chosen {
			return nil, fmt.Errorf("%s=%q names no backend; use one of %s", EnvBackend, os.Getenv(EnvBackend), strings.Join(known, ", "))
		}
		return nil, fmt.Errorf("no %s backend is linked into this binary (import package sandboxtest, which links them)", name)
	}
	octx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	d, err := open(octx)
	if err == nil {
		return d, nil
	}
	silent := ""
	if ctx.Err() == nil && errors.Is(octx.Err(), context.DeadlineExceeded) {
		silent = fmt.Sprintf(" within %s (backend.ResolveTimeout): an engine that takes connections and sends nothing back counts as none", ResolveTimeout)
	}
	if !chosen && errors.Is(err, ErrUnreachable) {
		return nil, fmt.Errorf("no sandbox engine answers%s: tried Docker (%w); start one (Docker Desktop, `systemctl start docker`, Podman's `podman system service`), point DOCKER_HOST at one, or set %s=msb to use microsandbox", silent, err, EnvBackend)
	}
	if silent != "" {
		return nil, fmt.Errorf("%s backend: no answer%s: %w", name, silent, err)
	}
	return nil, fmt.Errorf("%s backend: %w", name, err)
}
