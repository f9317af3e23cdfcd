package sandboxtest

import (
	"context"
	"testing"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Volume is a named volume sandboxes can mount (Spec.Mounts): what one
// sandbox of a test writes there, a later one reads. It is in the run's
// ledger before the engine makes it and carries the run's label, so it
// goes as the run's sandboxes go: when the test that made it ends, and,
// when the test process dies, by its watchdog, the engine-side keeper or
// the next sweep. The docker backend has volumes (Podman's too); the
// others fail NewVolume, saying so.
type Volume struct{ obj runObject }

// NewVolume creates a named volume rz-vol-<8 hex> for the test. Its
// removal is registered with tb.Cleanup first; since cleanups run last in,
// first out, sandboxes started afterwards that mount it are stopped
// before it goes.
func NewVolume(tb testing.TB) *Volume {
	tb.Helper()
	v := &Volume{obj: volumeObject(tbOwner{tb}, origin.Of(tb))}
	v.obj.make(tb)
	return v
}

// NewVolume returns a volume shared by the package's tests, created when a
// sandbox that mounts it first starts (or at its Name), and removed when
// Main ends.
func (s *Suite) NewVolume() *Volume {
	v := &Volume{obj: volumeObject(s, s.origin())}
	v.obj.makeLazily(s)
	return v
}

func volumeObject(o owner, og origin.Origin) runObject {
	return runObject{kind: names.VolumeKind, prefix: names.VolumePrefix, o: o, origin: og,
		create: func(ctx context.Context, s *reaper.Session, name string) (string, error) {
			return s.Driver().(backend.VolumeCreator).CreateVolume(ctx, name, s.RunID())
		}}
}

// Name is the volume's name; a suite's volume is created here when it was
// not yet ("" when it cannot be).
func (v *Volume) Name() string { return v.obj.Name() }

// Remove removes the volume, and its ledger line once it is gone. It fails
// while a sandbox still uses it. Calling it again after success does
// nothing.
func (v *Volume) Remove(ctx context.Context) error { return v.obj.Remove(ctx) }
