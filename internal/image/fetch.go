package image

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/jsonmessage"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

const (
	// copyPrefix starts the name of the container a copy is made through,
	// followed by the pid and 8 random hex digits: a leftover (the process
	// killed between create and remove) says what it is, and a test can
	// find its own.
	copyPrefix = "rightsize-busybox-copy-"
	// CopyLabel marks that container (value "1"): it is never started, and
	// `docker rm` of it is always safe.
	CopyLabel = "dev.rightsize.busybox-copy"

	busyboxInImage = "/bin/busybox"
	// pullTimeout bounds a pull of the ~1 MB image. A registry that cannot
	// be reached fails well before: the engine gives up on DNS or on
	// connecting within its own dial timeout.
	pullTimeout = 2 * time.Minute
	// removeTimeout bounds each removal, which runs even when ctx is done.
	removeTimeout = 30 * time.Second
	// maxBusybox bounds what is read out of the image (busybox is 1–3 MB).
	maxBusybox = 64 << 20
)

// copyFromImage returns the content of /bin/busybox in the image ref, for
// an engine whose containers are of architecture arch. It pulls ref (for
// that architecture) when the engine does not have it, creates a container
// of it without starting it, copies the file out through the API, and then
// always removes that container, and the image too when this call pulled
// it: the engine is left as it was found. It does not check the content,
// and its errors do not repeat what it was copying out of what.
func copyFromImage(ctx context.Context, cli *client.Client, ref, arch string) (content []byte, err error) {
	had, err := Present(ctx, cli, ref)
	if err != nil {
		return nil, err
	}
	if !had {
		// Registered before the pull, which may fail half-way, and so
		// before the container's removal: it runs after it.
		defer func() { err = errors.Join(err, removePulled(ctx, cli, ref)) }()
		if err := pull(ctx, cli, ref, arch); err != nil {
			return nil, err
		}
	}

	name := fmt.Sprintf("%s%d-%s", copyPrefix, os.Getpid(), randomHex())
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image: ref,
			// Never run; a command is set because the engine refuses to
			// create a container of an image that has none.
			Cmd:             []string{busyboxInImage, "true"},
			Labels:          map[string]string{CopyLabel: "1"},
			NetworkDisabled: true,
		},
	})
	// Registered before the error check: a create that failed (a timeout,
	// a cancelled ctx) may still have left a container of that name.
	defer func() { err = errors.Join(err, removeContainer(ctx, cli, name, created.ID)) }()
	if err != nil {
		return nil, fmt.Errorf("creating a container of %s: %w", ref, err)
	}
	// The caller says what was being copied out of what: the errors below
	// need not.
	res, err := cli.CopyFromContainer(ctx, created.ID, client.CopyFromContainerOptions{SourcePath: busyboxInImage})
	if err != nil {
		return nil, err
	}
	defer res.Content.Close()
	return singleFile(res.Content)
}

// pull pulls ref for linux/arch and waits until the engine has it: the
// engine reports most failures (an unknown tag, a registry refusing)
// inside the progress stream, not as the answer to the request.
func pull(ctx context.Context, cli *client.Client, ref, arch string) error {
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	resp, err := cli.ImagePull(ctx, ref, client.ImagePullOptions{
		Platforms: []ocispec.Platform{{OS: "linux", Architecture: arch}},
	})
	if err != nil {
		if client.IsErrConnectionFailed(err) {
			return fmt.Errorf("%w: %v", ErrNoEngine, err)
		}
		return fmt.Errorf("pulling %s for linux/%s: %w", ref, arch, err)
	}
	defer resp.Close()
	if err := jsonmessage.DisplayStream(resp, io.Discard); err != nil {
		return fmt.Errorf("pulling %s for linux/%s: %w", ref, arch, err)
	}
	return nil
}

// removeContainer removes the copy's container, by id when the create
// answered, by name otherwise (then "no such container" is the expected
// answer, not an error). It runs even when ctx is done.
func removeContainer(ctx context.Context, cli *client.Client, name, id string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	target := id
	if target == "" {
		target = name
	}
	_, err := cli.ContainerRemove(rctx, target, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err == nil || (id == "" && cerrdefs.IsNotFound(err)) {
		return nil
	}
	return fmt.Errorf("removing the container %s: %w; remove it with `docker rm -f %s`", name, err, name)
}

// removePulled removes an image this process pulled. Nothing there (the
// pull failed) is fine; so is an image in use, which means someone else
// took it up meanwhile, and it is theirs now.
func removePulled(ctx context.Context, cli *client.Client, ref string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	_, err := cli.ImageRemove(rctx, ref, client.ImageRemoveOptions{PruneChildren: true})
	if err == nil || cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("removing %s, pulled only for its busybox: %w; remove it with `docker rmi %s`", ref, err, ref)
}

// singleFile reads the one regular file of a tar archive (what the engine
// sends for a file's path).
func singleFile(r io.Reader) ([]byte, error) {
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("reading the archive the engine sent: %w", err)
	}
	switch h.Typeflag {
	case tar.TypeReg:
	case tar.TypeSymlink:
		return nil, fmt.Errorf("it is a symbolic link (to %s), not the executable", h.Linkname)
	default:
		return nil, fmt.Errorf("it is not a regular file (tar type %q)", h.Typeflag)
	}
	if h.Size > maxBusybox {
		return nil, fmt.Errorf("it is %d bytes; a busybox is a few MB", h.Size)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		return nil, fmt.Errorf("reading the archive the engine sent: %w", err)
	}
	return b, nil
}

func randomHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
