package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/image"
)

const (
	// demoRepository is where the demo's image is tagged, with 12 hex
	// digits of a hash of what went into it.
	demoRepository = "rightsize-demo/busybox"
	// demoImageLabel marks the demo's image (value "1").
	demoImageLabel = "dev.rightsize.demo-image"
	// demoImageLayout is hashed into the tag: change it whenever the way
	// the image is assembled changes.
	demoImageLayout = "1"
)

// demoImage returns the reference of the demo's image, importing it into
// the engine when it is not there: a static busybox (found as the test
// images' is, see image.FindBusybox), a link per applet, /tmp, FROM
// scratch. built says whether this call built it.
func demoImage(ctx context.Context, cli *client.Client) (ref string, built bool, err error) {
	noEngine := func(err error) error {
		return fmt.Errorf("no Docker engine answers (%v); run `make engine`, or point DOCKER_HOST at one", err)
	}
	bb, err := image.FindBusybox(ctx, func() (*client.Client, error) { return cli, nil })
	switch {
	case errors.Is(err, image.ErrNoEngine):
		return "", false, noEngine(err)
	case err != nil:
		return "", false, fmt.Errorf("the demo's image: %w", err)
	}
	sum := sha256.New()
	fmt.Fprintf(sum, "layout %s\n", demoImageLayout)
	sum.Write(bb.Content)
	ref = demoRepository + ":" + hex.EncodeToString(sum.Sum(nil))[:12]

	lockPath := filepath.Join(os.TempDir(), "rightsize-demo-image.lock")
	built, err = image.Ensure(ctx, cli, ref, lockPath, func(ctx context.Context) error {
		arch, err := image.EngineArch(ctx, cli)
		if err != nil {
			return err
		}
		if err := bb.CheckArch(arch); err != nil {
			return err
		}
		applets, err := bb.Applets(ctx, []string{"sh", "sleep"})
		if err != nil {
			return err
		}
		entries := append([]image.Entry{{Name: "tmp", Mode: 0o1777, Dir: true}}, bb.Entries(applets)...)
		rootfs, err := image.Tarball(entries)
		if err != nil {
			return err
		}
		changes := []string{"LABEL " + demoImageLabel + "=1", image.PathEnv, `CMD ["sleep", "3600"]`}
		return image.Import(ctx, cli, ref, rootfs, changes, "rightsize demo")
	})
	if errors.Is(err, image.ErrNoEngine) {
		return "", false, noEngine(err)
	}
	return ref, built, err
}
