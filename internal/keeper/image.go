package keeper

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/image"
)

// programSource is the keeper program: what it is built from, and what its
// tag hashes.
//
//go:embed program/*.go
var programSource embed.FS

const (
	// Repository is the keeper image's repository; its tag is a hash of
	// what it is built from.
	Repository = "rightsize-keeper"
	// LabelImage marks the keeper image (value "1"), so that
	// `docker image prune -a --filter label=dev.rightsize.keeper-image=1`
	// finds it.
	LabelImage = "dev.rightsize.keeper-image"

	// layout is part of the tag: change it whenever the way the image is
	// assembled changes, so that an engine's older image is not reused.
	layout = "1"
	// goMod makes the program a module of its own. Go 1.23 is the first
	// whose timers never deliver a stale tick after Reset, which the lease
	// loop relies on.
	goMod = "module rightsize-keeper\n\ngo 1.23\n"
	// programPath is where the program is in the image.
	programPath = "/keeper"

	buildTimeout = 3 * time.Minute
)

// ErrNoGo is wrapped by Ensure's error when the image is not on the engine
// and cannot be built because no go tool is found: the caller does without
// a keeper.
var ErrNoGo = image.ErrNoGoTool

// Ensure returns the reference of the keeper image on the engine cli
// talks to, building it there first when it is missing. The fast path is
// one call to the engine and no go tool. Nothing is ever pulled: the
// image is made FROM scratch of the one static binary the keeper program
// builds into, for the engine's architecture. Processes of this machine
// that get here at the same moment build it once (a file lock); the
// image stays on the engine, to be reused.
func Ensure(ctx context.Context, cli *client.Client) (string, error) {
	ref, _, err := ensure(ctx, cli, "")
	return ref, err
}

// ensure is Ensure, under repo (Repository when ""), and says whether it
// built the image.
func ensure(ctx context.Context, cli *client.Client, repo string) (ref string, built bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	if repo == "" {
		repo = Repository
	}
	ref = repo + ":" + tag()
	built, err = image.Ensure(ctx, cli, ref, "keeper-image.lock", func(ctx context.Context) error {
		arch, err := image.EngineArch(ctx, cli)
		if err != nil {
			return err
		}
		return build(ctx, cli, ref, arch)
	})
	if err != nil {
		return "", built, fmt.Errorf("keeper image: %w", err)
	}
	return ref, built, nil
}

// tag hashes what the image is made of: the program's source, the Go
// release of this program (standing for the one that builds it: the fast
// path must not need a go tool) and the layout. The target is not in it:
// an image is on the one engine it was built for, whose architecture it
// has, and asking an engine its architecture costs Podman 0.35 s.
func tag() string {
	h := sha256.New()
	fmt.Fprintf(h, "layout %s\ngo %s\ngo.mod %q\n", layout, runtime.Version(), goMod)
	for name, b := range programFiles() {
		fmt.Fprintf(h, "file %s %d\n", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// programFiles returns the program's files, tests aside, in the order of
// their names, and its go.mod last.
func programFiles() func(yield func(string, []byte) bool) {
	return func(yield func(string, []byte) bool) {
		entries, _ := fs.ReadDir(programSource, "program") // sorted by name
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || strings.HasSuffix(name, "_test.go") {
				continue
			}
			b, err := programSource.ReadFile("program/" + name)
			if err != nil || !yield(name, b) {
				return
			}
		}
		yield("go.mod", []byte(goMod))
	}
}

// buildProgram builds the keeper program, static, for linux/arch.
func buildProgram(ctx context.Context, arch string) ([]byte, error) {
	files := map[string][]byte{}
	for name, b := range programFiles() {
		files[name] = b
	}
	return image.BuildModule(ctx, files, arch)
}

// rootfs is the image's one layer: the program, and nothing else.
func rootfs(program []byte) ([]byte, error) {
	return image.Tarball([]image.Entry{{Name: strings.TrimPrefix(programPath, "/"), Mode: 0o755, Content: program}})
}

func build(ctx context.Context, cli *client.Client, ref, arch string) error {
	program, err := buildProgram(ctx, arch)
	if err != nil {
		return err
	}
	layer, err := rootfs(program)
	if err != nil {
		return err
	}
	changes := []string{
		"LABEL " + LabelImage + "=1",
		`LABEL org.opencontainers.image.description="rightsize-go's lease keeper: removes a run's containers and networks when its lease ends"`,
		`ENTRYPOINT ["` + programPath + `"]`,
	}
	return image.Import(ctx, cli, ref, layer, changes, "rightsize-go internal/keeper")
}
