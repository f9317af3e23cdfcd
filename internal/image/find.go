package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// EnvBusybox names a static Linux busybox to use instead of any other.
const EnvBusybox = "RIGHTSIZE_BUSYBOX"

// BusyboxImage is the official image a busybox is copied out of when this
// machine has none. Its musl variant is the one the image's documentation
// says is "statically compiled" (glibc's is not); the tag is pinned, not
// "musl", so that every laptop gets the same busybox and the test images'
// tags (a hash of the busybox) stay put until this line changes.
// scripts/engine.sh and the README name it too.
const BusyboxImage = "busybox:1.37.0-musl"

// Where FindBusybox found a busybox (Busybox.Source).
const (
	FromEnv    = "env"    // RIGHTSIZE_BUSYBOX
	FromSystem = "system" // /bin/busybox
	FromCache  = "cache"  // a copy out of BusyboxImage made by an earlier run
	FromImage  = "image"  // copied out of BusyboxImage by this call
)

// busyboxLock is the build lock (ledger.SharedLockPath) of the copy out of
// BusyboxImage.
const busyboxLock = "busybox-copy.lock"

// ErrNoBusybox is wrapped by FindBusybox's errors that mean no static
// busybox could be had. The message says what was tried and how to fix it.
var ErrNoBusybox = errors.New("no static Linux busybox")

// FindBusybox returns the static Linux busybox the images are made of, from
// the first of these places that has one:
//
//  1. RIGHTSIZE_BUSYBOX, when set; it must be a static busybox, and nothing
//     else is tried (what the user named is what the user gets);
//  2. /bin/busybox, when it is static (Debian's busybox-static);
//  3. the copy of BusyboxImage's /bin/busybox an earlier call cached for the
//     engine's architecture, under the user's cache folder;
//  4. BusyboxImage's /bin/busybox, copied out through the Docker API (the
//     image pulled when the engine does not have it, and removed again in
//     that case), checked, and cached for the next time.
//
// engine is called only for 3 and 4, which depend on the engine's
// architecture: with a busybox on the host, nothing here needs the engine.
// A failure to connect is returned wrapping ErrNoEngine.
//
// The cache is <user cache dir>/rightsize/busybox (os.UserCacheDir:
// ~/.cache/rightsize/busybox on Linux), not RIGHTSIZE_CACHE_DIR: that is the
// ledger's folder, which tests and the demo point at throwaway folders, and
// the copy must outlive them.
func FindBusybox(ctx context.Context, engine func() (*client.Client, error)) (*Busybox, error) {
	var cli *client.Client
	connect := func() (*client.Client, error) {
		if cli == nil {
			c, err := engine()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrNoEngine, err)
			}
			cli = c
		}
		return cli, nil
	}
	f := &finder{
		env:      os.Getenv(EnvBusybox),
		system:   DefaultBusybox,
		image:    BusyboxImage,
		lockPath: func() (string, error) { return ledger.SharedLockPath(busyboxLock) },
		arch: func(ctx context.Context) (string, error) {
			c, err := connect()
			if err != nil {
				return "", err
			}
			return EngineArch(ctx, c)
		},
		fetch: func(ctx context.Context, arch string) ([]byte, error) {
			c, err := connect()
			if err != nil {
				return nil, err
			}
			return copyFromImage(ctx, c, BusyboxImage, arch)
		},
	}
	if dir, err := os.UserCacheDir(); err != nil {
		f.noCache = err
	} else {
		f.cacheDir = filepath.Join(dir, "rightsize", "busybox")
	}
	return f.find(ctx)
}

// finder is FindBusybox with every outside thing it uses in a field, so
// that the order can be tested with files alone.
type finder struct {
	env      string // RIGHTSIZE_BUSYBOX ("" when unset)
	system   string // /bin/busybox
	cacheDir string // "" when there is none, and noCache says why
	noCache  error
	image    string
	lockPath func() (string, error) // the lock that serializes fetches: see find
	arch     func(ctx context.Context) (string, error)
	fetch    func(ctx context.Context, arch string) ([]byte, error)
}

func (f *finder) find(ctx context.Context) (*Busybox, error) {
	if f.env != "" {
		bb, err := ReadBusybox(f.env)
		if err != nil {
			return nil, fmt.Errorf("%w: %s=%s: %v; point it at a static Linux busybox, or unset it to use /bin/busybox or a copy out of %s",
				ErrNoBusybox, EnvBusybox, f.env, reason(err), f.image)
		}
		bb.Source = FromEnv
		return bb, nil
	}
	tried := []string{EnvBusybox + " (not set)"}
	bb, err := ReadBusybox(f.system)
	if err == nil {
		bb.Source = FromSystem
		return bb, nil
	}
	systemErr := err
	tried = append(tried, fmt.Sprintf("%s (%s)", f.system, reason(systemErr)))

	arch, err := f.arch(ctx)
	if err != nil {
		return nil, fmt.Errorf("no static busybox at %s (%s), and getting one out of %s needs the engine: %w",
			f.system, reason(systemErr), f.image, err)
	}
	fail := func(what string) error {
		tried = append(tried, what)
		return fmt.Errorf("%w for the engine's %s containers. Tried, in order: %s. To fix it: install a static busybox at %s "+
			"(Debian or Ubuntu: `sudo apt-get install busybox-static`), or set %s to a static Linux busybox built for %s, "+
			"or make a registry reachable so that the engine can pull %s once (`docker pull %s` must work; the copy is then cached)",
			ErrNoBusybox, arch, strings.Join(tried, "; "), f.system, EnvBusybox, arch, f.image, f.image)
	}
	if f.cacheDir == "" {
		return nil, fail(fmt.Sprintf("a cached copy of %s's busybox (there is no user cache folder to keep one in: %v)", f.image, f.noCache))
	}
	cached := filepath.Join(f.cacheDir, cacheName(f.image, arch))
	if bb, err := readFor(cached, arch); err == nil {
		bb.Source = FromCache
		return bb, nil
	}

	// Test binaries of several packages get here at the same moment on a
	// laptop's first run. One copies, the others wait and find its copy;
	// and no one removes a pulled image another is still using.
	lockPath, err := f.lockPath()
	if err != nil {
		return nil, fmt.Errorf("the lock of the copy out of %s: %w", f.image, err)
	}
	unlock, err := lockFile(ctx, lockPath)
	if err != nil {
		return nil, err
	}
	defer unlock()
	bb, err = readFor(cached, arch)
	if err == nil {
		bb.Source = FromCache
		return bb, nil
	}
	tried = append(tried, fmt.Sprintf("the cached copy %s (%s)", cached, reason(err)))

	content, err := f.fetch(ctx, arch)
	if err != nil {
		return nil, fail(fmt.Sprintf("copying /bin/busybox out of %s (%v)", f.image, err))
	}
	label := "/bin/busybox of " + f.image
	bb, err = parseBusybox(label, content)
	if err != nil {
		return nil, fail(fmt.Sprintf("%s (%v)", label, err))
	}
	if err := bb.CheckArch(arch); err != nil {
		return nil, fail(err.Error()) // it names the label
	}
	if err := writeAtomic(cached, content); err != nil {
		return nil, fmt.Errorf("caching %s: %w", label, err)
	}
	bb.Path, bb.Source = cached, FromImage
	return bb, nil
}

// cacheName is the cached copy's file name: the image's tag and the
// architecture, e.g. 1.37.0-musl-amd64.
func cacheName(ref, arch string) string {
	tag := ref
	if i := strings.LastIndex(ref, ":"); i >= 0 {
		tag = ref[i+1:]
	}
	return tag + "-" + arch
}

// readFor reads a busybox that must be static and built for arch.
func readFor(path, arch string) (*Busybox, error) {
	bb, err := ReadBusybox(path)
	if err != nil {
		return nil, err
	}
	if err := bb.CheckArch(arch); err != nil {
		return nil, err
	}
	return bb, nil
}

// reason is why a file was refused, without repeating its path.
func reason(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "no such file"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// writeAtomic writes an executable file at path through a temporary file
// in the same folder, so that a reader finds the old file or the whole new
// one, never a part.
func writeAtomic(path string, content []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.Write(content)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
