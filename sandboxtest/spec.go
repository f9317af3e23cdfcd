package sandboxtest

import (
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Spec describes a sandbox. The zero value of every field but Image is a
// sensible default.
type Spec struct {
	// Image to run. It is never pulled by rightsize itself; Docker pulls it
	// through testcontainers-go when it is missing and a registry answers.
	Image string
	// Cmd replaces the image's command.
	Cmd []string
	Env map[string]string
	// Labels are added to the sandbox's own (Docker labels; ignored by msb).
	// The labels rightsize sets itself cannot be replaced.
	Labels map[string]string
	// Ports to publish, as "8080/tcp" (or "8080"). On a local engine they are
	// published on 127.0.0.1 only; MappedPort tells the host port.
	Ports []string
	// Reuse asks for a keep-alive sandbox: adopted if one with the same
	// identity runs, left running when the test ends. It takes effect only
	// when RIGHTSIZE_REUSE is "true" or "1"; otherwise the sandbox is an
	// ordinary one.
	Reuse bool
	// Networks to join, created with NewNetwork; Aliases are the sandbox's
	// names on each of them.
	Networks []*Network
	Aliases  []string
	// MemoryLimitMB limits memory; 0 means no limit.
	MemoryLimitMB int
	// Files are copied into the sandbox before it starts.
	Files []File
	// WaitingFor is a testcontainers-go wait strategy (Docker backend):
	// Start returns once it is satisfied. Strategies see Host() as the guard
	// does.
	WaitingFor wait.Strategy
	// StopGrace is how long Stop waits after SIGTERM before removing the
	// sandbox by force; 0 means 2 s, less when the test's deadline is near.
	StopGrace time.Duration
	// Customize applies testcontainers-go customizers to the request (Docker
	// backend only), after everything above.
	Customize []testcontainers.ContainerCustomizer
}

// File is content copied into the sandbox at GuestPath.
type File struct {
	GuestPath string
	Content   []byte
	// Mode defaults to 0644.
	Mode int64
}
