package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/jsonmessage"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// ErrNoEngine is wrapped by errors that mean no engine answered, so that a
// caller can add its own advice on how to get one.
var ErrNoEngine = errors.New("engine unreachable")

// Entry is one file, directory (Dir) or symbolic link (Link) of a root file
// system.
type Entry struct {
	Name    string // path inside the image, without a leading '/'
	Mode    int64
	Dir     bool
	Link    string // target of a symbolic link
	Content []byte
}

// Tarball writes entries, in order, as an uncompressed tar archive. Every
// entry gets the same fixed time, so that the same inputs give the same
// layer.
func Tarball(entries []Entry) ([]byte, error) {
	mtime := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, ModTime: mtime, Typeflag: tar.TypeReg, Size: int64(len(e.Content))}
		switch {
		case e.Dir:
			h.Typeflag, h.Name, h.Size = tar.TypeDir, e.Name+"/", 0
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Mode, h.Size = tar.TypeSymlink, e.Link, 0o777, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Content); err != nil {
				return nil, fmt.Errorf("tar %s: %w", e.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Present reports whether the engine has an image ref. An engine that does
// not answer is an error wrapping ErrNoEngine.
func Present(ctx context.Context, cli *client.Client, ref string) (bool, error) {
	_, err := cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	case client.IsErrConnectionFailed(err):
		return false, fmt.Errorf("%w: %v", ErrNoEngine, err)
	default:
		return false, fmt.Errorf("inspecting %s: %w", ref, err)
	}
}

// EngineArch returns the architecture, in GOARCH terms, of the engine's
// containers; an engine that does not run Linux containers is an error.
func EngineArch(ctx context.Context, cli *client.Client) (string, error) {
	ver, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		if client.IsErrConnectionFailed(err) {
			return "", fmt.Errorf("%w: %v", ErrNoEngine, err)
		}
		return "", fmt.Errorf("asking the engine its version: %w", err)
	}
	if ver.Os != "linux" {
		return "", fmt.Errorf("the engine runs %s containers; these images are Linux images", ver.Os)
	}
	return ver.Arch, nil
}

// Import imports rootfs (a tar archive) as image ref, with Dockerfile
// instructions applied (LABEL, ENV, CMD…) and message as its history.
func Import(ctx context.Context, cli *client.Client, ref string, rootfs []byte, changes []string, message string) error {
	resp, err := cli.ImageImport(ctx,
		client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"},
		ref,
		client.ImageImportOptions{Changes: changes, Message: message})
	if err != nil {
		return fmt.Errorf("importing the root file system: %w", err)
	}
	defer resp.Close()
	if err := jsonmessage.DisplayStream(resp, io.Discard); err != nil {
		return fmt.Errorf("importing the root file system: %w", err)
	}
	return nil
}

// Ensure makes sure the engine has ref, calling build when it does not.
// Processes that get here at the same moment serialize on the build lock
// lockName (see lockFile): one builds, the others wait, then find its
// image. built tells whether this call built it.
func Ensure(ctx context.Context, cli *client.Client, ref, lockName string, build func(context.Context) error) (built bool, err error) {
	if ok, err := Present(ctx, cli, ref); ok || err != nil {
		return false, err
	}
	path, err := ledger.SharedLockPath(lockName)
	if err != nil {
		return false, fmt.Errorf("the build lock of %s: %w", ref, err)
	}
	unlock, err := lockFile(ctx, path)
	if err != nil {
		return false, err
	}
	defer unlock()
	if ok, err := Present(ctx, cli, ref); ok || err != nil {
		return false, err
	}
	if err := build(ctx); err != nil {
		return false, fmt.Errorf("building %s: %w", ref, err)
	}
	if ok, err := Present(ctx, cli, ref); !ok && err == nil {
		return true, fmt.Errorf("%s was imported but the engine does not list it", ref)
	} else if err != nil {
		return true, err
	}
	return true, nil
}

// lockFile takes an exclusive lock on the file at path (a build lock, in
// the user's own folder: ledger.SharedLockPath), waiting for it until ctx
// ends, and returns its release. The file is opened as every file of the
// ledger is: a link is not followed, a FIFO does not block, and anything
// but a regular file is refused with an error that says what is there.
//
// The release deletes the lock file while still holding it, so that none
// is left behind: a process that opened it before then gets its lock on a
// deleted file, and takes the next one (ledger.FileLock). Every caller
// looks again, once it holds the lock, for what another holder may have
// made meanwhile.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	lock := ledger.NewFileLock(path)
	if _, err := lock.TryLockContext(ctx, 50*time.Millisecond); err != nil {
		return nil, fmt.Errorf("the build lock %s: %w", path, err)
	}
	return func() { _ = lock.Remove() }, nil
}
