package testimage

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/image"
)

const (
	kindBusybox = "busybox"
	kindNoShell = "noshell"
	kindVolume  = "volume"

	repository = "rightsize-test/"
	// layout is part of every tag: change it whenever the way an image is
	// assembled changes, so that the engine's older image is not reused.
	layout = "1"

	serverPackage = "github.com/rightsize/rightsize-go/internal/testimage/server"
	buildTimeout  = 3 * time.Minute
	fixHint       = "run `make engine` (as root on Debian it installs and starts dockerd and busybox-static)"
)

// serverSource is hashed into every tag, so that a change to the server
// gives new images.
//
//go:embed server/*.go
var serverSource embed.FS

// requiredApplets must be in the busybox's list of applets, and are linked
// even when `busybox --list` cannot run here (a busybox for another
// architecture).
var requiredApplets = []string{
	"sh", "sleep", "setsid", "kill", "cat", "echo", "nc", "yes", "ls", "ps",
	"top", "wget", "env", "timeout", "true", "false", "test", "mkdir", "rm",
	"printf", "head", "grep",
}

// ensure returns the reference of an image of that kind on the engine,
// building it when the engine does not have it.
func ensure(kind string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()

	var bb *image.Busybox
	if kind == kindBusybox || kind == kindVolume {
		var err error
		if bb, err = findBusybox(ctx); err != nil {
			return "", err
		}
	}
	ref := repository + kind + ":" + tag(kind, bb)

	cli, err := engine()
	if err != nil {
		return "", noEngine(err)
	}
	// Test binaries of several packages get here at the same moment; one
	// builds, the others wait and then find its image.
	_, err = image.Ensure(ctx, cli, ref, "testimage.lock", func(ctx context.Context) error {
		return build(ctx, cli, kind, ref, bb)
	})
	switch {
	case errors.Is(err, image.ErrNoEngine):
		return "", noEngine(err)
	case err != nil:
		return "", fmt.Errorf("testimage: %w", err)
	}
	return ref, nil
}

// tag hashes what goes into an image of that kind. The server binary itself
// is not hashed: building it costs a go build, and the fast path must not.
// Its source and the Go version stand for it.
func tag(kind string, bb *image.Busybox) string {
	h := sha256.New()
	fmt.Fprintf(h, "layout %s\nkind %s\ngo %s\n", layout, kind, runtime.Version())
	if bb != nil {
		fmt.Fprintf(h, "busybox %x\n", sha256.Sum256(bb.Content))
	}
	// WalkDir visits in lexical order: the hash does not depend on the file
	// system.
	_ = fs.WalkDir(serverSource, "server", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := serverSource.ReadFile(p)
		fmt.Fprintf(h, "file %s %d\n", p, len(b))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

var engineOnce struct {
	sync.Once
	cli *client.Client
	err error
}

// engine connects to the engine testcontainers-go would use (DOCKER_HOST,
// the Docker context, ~/.testcontainers.properties, the default sockets), so
// that the images are where the tests' containers will be created. Its
// error is the bare cause: noEngine adds the advice.
func engine() (*client.Client, error) {
	engineOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			engineOnce.err = err
			return
		}
		engineOnce.cli = c.Client
	})
	return engineOnce.cli, engineOnce.err
}

func noEngine(err error) error {
	return fmt.Errorf("testimage: no Docker engine answers (%w); engine tests need one: %s, or point DOCKER_HOST at one, or set %s=1 to skip these tests", err, fixHint, EnvSkip)
}

// findBusybox finds the busybox the image is made of (see
// image.FindBusybox: RIGHTSIZE_BUSYBOX, /bin/busybox, a cached copy, or a
// copy out of the busybox image). The engine is connected to only when
// the host has no busybox.
func findBusybox(ctx context.Context) (*image.Busybox, error) {
	bb, err := image.FindBusybox(ctx, engine)
	switch {
	case errors.Is(err, image.ErrNoEngine):
		return nil, noEngine(err)
	case err != nil:
		return nil, fmt.Errorf("testimage: the busybox image: %w", err)
	}
	return bb, nil
}

func build(ctx context.Context, cli *client.Client, kind, ref string, bb *image.Busybox) error {
	arch, err := image.EngineArch(ctx, cli)
	if err != nil {
		return err
	}
	files, cfg, err := assemble(ctx, kind, arch, bb)
	if err != nil {
		return err
	}
	rootfs, err := image.Tarball(files)
	if err != nil {
		return err
	}
	changes := []string{"LABEL " + Label + "=1", "CMD " + jsonArray(cfg.Cmd)}
	if len(cfg.Env) > 0 {
		changes = append(changes, "ENV "+cfg.Env[0])
	}
	if kind == kindVolume {
		changes = append(changes, `VOLUME ["`+VolumePath+`"]`)
	}
	return image.Import(ctx, cli, ref, rootfs, changes, "rightsize-go internal/testimage")
}

// assemble is what an image of that kind holds for arch, and its
// configuration.
func assemble(ctx context.Context, kind, arch string, bb *image.Busybox) ([]image.Entry, image.Config, error) {
	server, err := buildServer(ctx, arch)
	if err != nil {
		return nil, image.Config{}, err
	}
	files := []image.Entry{
		{Name: "server", Mode: 0o755, Content: server},
		{Name: "tmp", Mode: 0o1777, Dir: true},
	}
	cfg := image.Config{Arch: arch, Labels: map[string]string{Label: "1"}}
	switch kind {
	case kindBusybox, kindVolume:
		if err := bb.CheckArch(arch); err != nil {
			return nil, cfg, err
		}
		applets, err := bb.Applets(ctx, requiredApplets)
		if err != nil {
			return nil, cfg, fmt.Errorf("%w, which the tests use", err)
		}
		files = append(files, bb.Entries(applets)...)
		cfg.Env, cfg.Cmd = []string{strings.TrimPrefix(image.PathEnv, "ENV ")}, []string{"sleep", "3600"}
		if kind == kindVolume {
			files = append(files, image.Entry{Name: VolumePath[1:], Mode: 0o755, Dir: true})
		}
	case kindNoShell:
		cfg.Cmd = []string{ServerPath}
	default:
		return nil, cfg, fmt.Errorf("no image kind %q", kind)
	}
	return files, cfg, nil
}

// archiveOf is the image of that kind, named as on an engine, as an archive
// for this machine's architecture (image.Archive).
func archiveOf(kind string) (string, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	bb, err := findBusybox(ctx)
	if err != nil {
		return "", nil, err
	}
	ref := repository + kind + ":" + tag(kind, bb)
	files, cfg, err := assemble(ctx, kind, runtime.GOARCH, bb)
	if err != nil {
		return "", nil, fmt.Errorf("testimage: %w", err)
	}
	rootfs, err := image.Tarball(files)
	if err != nil {
		return "", nil, fmt.Errorf("testimage: %w", err)
	}
	a, err := image.Archive(ref, rootfs, cfg)
	if err != nil {
		return "", nil, fmt.Errorf("testimage: %w", err)
	}
	return ref, a, nil
}

func jsonArray(words []string) string {
	b, _ := json.Marshal(words)
	return string(b)
}

// buildServer builds ./server for linux/arch and returns the executable.
func buildServer(ctx context.Context, arch string) ([]byte, error) {
	return image.BuildStatic(ctx, "", serverPackage, arch)
}
