package sandboxtest

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/names"
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
	// Ports to publish, as "8080/tcp" (or "8080"). Beside a local engine
	// they are published on 127.0.0.1 only; Guard.Endpoint tells where.
	Ports []string
	// Reuse asks for a keep-alive sandbox: adopted if one with the same
	// identity runs, left running when the test ends. It takes effect only
	// when RIGHTSIZE_REUSE is "true" or "1"; otherwise the sandbox is an
	// ordinary one. A spec is checked the same way either way: one that
	// could not be kept alive is refused even when reuse is off.
	Reuse bool
	// ReuseKey is needed by a keep-alive spec with Customize or Labels,
	// which the family's identity hash cannot see: a name for what they
	// make different, which keeps this sandbox apart from any other with
	// the same image, command, environment, ports and files. Change it
	// whenever they change.
	ReuseKey string
	// ReuseTTL is how long a keep-alive sandbox of this spec may go
	// unused before a sweep (the next test process's first use, or
	// `rightsize sweep`) removes it: an idle time-to-live, counted from
	// the last time any test process adopted it or let it go. It also
	// applies to an older keep-alive this one superseded (made by the same
	// test, at the same place, from the same image repository, before the
	// spec changed). 0 leaves it to RIGHTSIZE_REUSE_TTL, whose unset
	// default keeps keep-alive sandboxes until they are removed by hand.
	ReuseTTL time.Duration
	// Networks to join, created with NewNetwork; Aliases are the sandbox's
	// names on each of them.
	Networks []*Network
	Aliases  []string
	// Mounts are named volumes, created with NewVolume, mounted into the
	// sandbox (the docker backend, and Podman through it).
	Mounts []Mount
	// MemoryLimitMB limits memory; 0 means no limit.
	MemoryLimitMB int
	// Files are copied into the sandbox before it starts.
	Files []File
	// WaitingFor is a testcontainers-go wait strategy (the docker and
	// kubernetes backends): Start returns once it is satisfied. Strategies
	// see the host and ports the guard gives; on Kubernetes they see the
	// pod as a container (its logs, its state, its ports forwarded from
	// outside the cluster, its commands through Exec).
	WaitingFor wait.Strategy
	// StopGrace is how long Stop waits after SIGTERM before removing the
	// sandbox by force; 0 means 2 s, less when the test's deadline is near.
	StopGrace time.Duration
	// Customize applies testcontainers-go customizers to the request (Docker
	// backend only), after everything above.
	Customize []testcontainers.ContainerCustomizer
}

// Mount mounts Volume at Path, an absolute path in the sandbox; read-only
// when ReadOnly.
type Mount struct {
	Volume   *Volume
	Path     string
	ReadOnly bool
}

// File is content copied into the sandbox at GuestPath.
type File struct {
	GuestPath string
	Content   []byte
	// Mode defaults to 0644.
	Mode fs.FileMode
}

// check refuses a spec that cannot be started as asked, the same whatever
// RIGHTSIZE_REUSE says: turning the keep-alive speed-up on must never break
// a test that passes without it.
func (spec Spec) check() error {
	if spec.Image == "" {
		return errors.New("Spec.Image is empty")
	}
	for _, n := range spec.Networks {
		if n == nil {
			return errors.New("Spec.Networks holds a nil *Network")
		}
	}
	for _, m := range spec.Mounts {
		switch {
		case m.Volume == nil:
			return fmt.Errorf("Spec.Mounts: the mount at %q has no Volume (make one with NewVolume)", m.Path)
		case m.Volume.obj.kind != names.VolumeKind:
			return fmt.Errorf("Spec.Mounts: the Volume mounted at %q was not made by NewVolume", m.Path)
		case !strings.HasPrefix(m.Path, "/"):
			return fmt.Errorf("Spec.Mounts: the mount path %q is not absolute", m.Path)
		}
	}
	if spec.ReuseTTL < 0 {
		return fmt.Errorf("Spec.ReuseTTL is %s: want a positive duration, or 0 for RIGHTSIZE_REUSE_TTL's", spec.ReuseTTL)
	}
	if !spec.Reuse {
		if spec.ReuseTTL > 0 {
			return errors.New("Spec.ReuseTTL without Spec.Reuse: only a keep-alive sandbox outlives its test")
		}
		return nil
	}
	if strings.HasPrefix(spec.Image, names.ImagePrefix) {
		return fmt.Errorf("Spec.Reuse with the image %s, which NewImage built: a keep-alive sandbox outlives the test's images, so it cannot run one; drop Reuse, or build the image outside the test", spec.Image)
	}
	if len(spec.Mounts) > 0 {
		return errors.New("Spec.Reuse with Spec.Mounts: a keep-alive sandbox outlives the test's volumes, so it cannot mount one; drop Reuse, or Mounts")
	}
	if len(spec.Networks) > 0 {
		return errors.New("Spec.Reuse with Spec.Networks: a keep-alive sandbox outlives the test's networks, so it cannot join one; drop Reuse, or reach the keep-alive sandbox through its published ports")
	}
	if (len(spec.Customize) > 0 || len(spec.Labels) > 0) && spec.ReuseKey == "" {
		return errors.New("Spec.Reuse with Spec.Customize or Spec.Labels needs Spec.ReuseKey: the family's identity hash cannot see what they change, and two different sandboxes would share one container")
	}
	return nil
}

// makeObjects makes the spec's networks and volumes that a suite makes at
// their first use (those of a test exist already).
func (spec Spec) makeObjects() error {
	for _, n := range spec.Networks {
		if err := n.obj.lazy.do(); err != nil {
			return fmt.Errorf("its network did not start: %w", err)
		}
	}
	for _, m := range spec.Mounts {
		if err := m.Volume.obj.lazy.do(); err != nil {
			return fmt.Errorf("its volume was not made: %w", err)
		}
		if m.Volume.obj.isRemoved() {
			// The engine would make a volume of that name anew, unlisted.
			return fmt.Errorf("its volume %s was removed (by Remove, or at the end of the test that made it)", m.Volume.obj.name)
		}
	}
	return nil
}
