package sandboxtest

import (
	"context"
	"maps"
	"path/filepath"
	"testing"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Build is an image to build: the folder Dir is the build's context (less
// what its .dockerignore names), with the Dockerfile at Dockerfile in it
// ("Dockerfile" when empty), given the build arguments Args. A relative
// Dir is taken from the test's working directory, its package's folder.
type Build struct {
	Dir        string
	Dockerfile string
	Args       map[string]string
}

// Image is an image built for the test (NewImage), to start sandboxes of:
// Spec{Image: img.Name()}. It is in the run's ledger before the engine
// builds it, and carries the run's image marks (never the run's own label,
// which its containers would inherit), so it goes as the run's sandboxes
// go: when the test that built it ends, and, when the test process dies,
// by its watchdog, the engine-side keeper or the next sweep; with it go
// the intermediate images its build made. It is built without the
// engine's cache, so that each of its layers is its own: a layer shared
// with another run's build would outlive both. An image a sandbox still runs
// from (a keep-alive's, another run's) is kept, never forced; an image
// that had the tag before is never touched. The docker backend builds
// images (Podman's too); the others fail NewImage, saying so.
type Image struct{ obj runObject }

// NewImage builds b for the test, tagged rz-img-<8 hex>. A build that
// fails fails the test, quoting the end of the build's output, and leaves
// none of its steps' images (a build cut short by the process's death
// leaves those of the steps it finished, which carry no mark). Its removal
// is registered with tb.Cleanup first; since cleanups run last in, first
// out, sandboxes started afterwards from it are stopped before it goes.
func NewImage(tb testing.TB, b Build) *Image {
	tb.Helper()
	img := &Image{obj: imageObject(tbOwner{tb}, origin.Of(tb), b)}
	img.obj.make(tb)
	return img
}

// NewImage returns an image shared by the package's tests, built when a
// test first asks for its Name, and removed when Main ends.
func (s *Suite) NewImage(b Build) *Image {
	img := &Image{obj: imageObject(s, s.origin(), b)}
	img.obj.makeLazily(s)
	return img
}

func imageObject(o owner, og origin.Origin, b Build) runObject {
	bb := backend.Build{Dir: b.Dir, Dockerfile: b.Dockerfile, Args: maps.Clone(b.Args)}
	if abs, err := filepath.Abs(b.Dir); err == nil {
		// As the test's folder was at NewImage: a test that changes its
		// working directory later does not move a suite's build. A link
		// is followed: the context is packed from the folder it names.
		bb.Dir = abs
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			bb.Dir = real
		}
	}
	return runObject{kind: names.ImageKind, prefix: names.ImagePrefix, o: o, origin: og,
		create: func(ctx context.Context, s *reaper.Session, name string) (string, error) {
			return s.Driver().(backend.ImageBuilder).BuildImage(ctx, name, s.RunID(), bb)
		}}
}

// Name is the image's name and tag, what Spec.Image takes; a suite's
// image is built here when it was not yet ("" when it cannot be).
func (img *Image) Name() string { return img.obj.Name() }

// Remove removes the image (with the intermediate images its build made),
// and its ledger line once it is gone. It fails while a sandbox still runs
// from it. Calling it again after success does nothing.
func (img *Image) Remove(ctx context.Context) error { return img.obj.Remove(ctx) }
