package testimage

import (
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/rightsize/rightsize-go/internal/image"
)

const (
	// Label marks every image this package builds (value "1"), so that
	// `docker image prune -a --filter label=dev.rightsize.test-image=1`
	// removes them all.
	Label = "dev.rightsize.test-image"
	// ServerPath is where the server program is, in both images.
	ServerPath = "/server"
	// ServerPort is the port the server listens on when given none.
	ServerPort = "8080/tcp"

	// EnvSkip set to 1 (or any true value) skips the calling test instead
	// of building anything.
	EnvSkip = "RIGHTSIZE_SKIP_ENGINE_TESTS"
	// EnvBusybox names the static busybox to put in the image, instead of
	// /bin/busybox or a copy out of image.BusyboxImage.
	EnvBusybox = image.EnvBusybox
)

// Busybox returns the reference of the busybox image (rightsize-test/busybox
// tagged with 12 hex digits of its content hash), building it on the
// engine if it is not there yet. It fails tb when the image cannot be had.
func Busybox(tb testing.TB) string {
	tb.Helper()
	return busybox.get(tb)
}

// BusyboxRef is Busybox for a program that is not a test (the benchmark,
// the chaos harness): no gate, and the error returned.
func BusyboxRef() (string, error) {
	busybox.once.Do(func() { busybox.ref, busybox.err = ensure(busybox.kind) })
	return busybox.ref, busybox.err
}

// Volume returns the reference of the busybox image with a VOLUME
// (VolumePath): every container made of it gets an anonymous volume of its
// own, as PostgreSQL's data folder does.
func Volume(tb testing.TB) string {
	tb.Helper()
	return volume.get(tb)
}

// VolumePath is the volume Volume's image declares.
const VolumePath = "/data"

// NoShell returns the reference of an image holding only /server: no shell,
// no other program, for the tests of what happens without one.
func NoShell(tb testing.TB) string {
	tb.Helper()
	return noShell.get(tb)
}

// BusyboxArchive is Busybox's image, of the same reference, built here
// with no engine as an archive (`docker save`'s form) for this machine's
// architecture: for a runtime that is not the engine, such as a
// Kubernetes node's containerd, to import. It fails tb when it cannot be
// made; it needs no engine where the host has a static busybox.
func BusyboxArchive(tb testing.TB) (ref string, archive []byte) {
	tb.Helper()
	ref, archive, err := BusyboxArchiveBytes()
	if err != nil {
		tb.Fatal(err)
	}
	return ref, archive
}

// BusyboxArchiveBytes is BusyboxArchive for a program that is not a test
// (the chaos harness).
func BusyboxArchiveBytes() (ref string, archive []byte, err error) {
	busyboxArchive.once.Do(func() { busyboxArchive.ref, busyboxArchive.data, busyboxArchive.err = archiveOf(kindBusybox) })
	return busyboxArchive.ref, busyboxArchive.data, busyboxArchive.err
}

var busyboxArchive struct {
	once sync.Once
	ref  string
	data []byte
	err  error
}

var (
	busybox = &lazyImage{kind: kindBusybox}
	noShell = &lazyImage{kind: kindNoShell}
	volume  = &lazyImage{kind: kindVolume}
)

// lazyImage memoizes one kind of image for the life of the process; a
// failure is memoized too, so that every test asking for it fails with the
// same message instead of retrying a build that cannot work.
type lazyImage struct {
	kind string
	// noGate: a test of the memoization itself, which needs no engine.
	noGate bool
	once   sync.Once
	ref    string
	err    error
}

// Engine is the gate of every test that needs the engine: under -short it
// skips the test, saying so in one line (`go test -short ./...` runs only
// the tests that need no engine, anywhere); so does RIGHTSIZE_SKIP_ENGINE_TESTS.
// Otherwise it returns, and the test fails, not skips, when no engine
// answers: `make test` is the whole gate.
func Engine(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a container engine: skipped with -short")
	}
	if skip, _ := strconv.ParseBool(os.Getenv(EnvSkip)); skip {
		tb.Skip(EnvSkip + "=" + os.Getenv(EnvSkip) + ": engine tests skipped")
	}
}

func (im *lazyImage) get(tb testing.TB) string {
	tb.Helper()
	if !im.noGate {
		Engine(tb)
	}
	im.once.Do(func() { im.ref, im.err = ensure(im.kind) })
	if im.err != nil {
		tb.Fatal(im.err)
	}
	return im.ref
}
