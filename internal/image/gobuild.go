package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// ErrNoGoTool is wrapped by the error of a build that could not start
// because no go tool was found, so that a caller can fall back to doing
// without the image.
var ErrNoGoTool = errors.New("the go tool is not on the PATH")

// BuildStatic builds Go package pkg (as the go tool names it, from dir;
// "" is this process's folder) into one static linux/arch binary and
// returns it, for an image made FROM scratch. GOFLAGS is cleared: a -race
// or -cover meant for the tests would fail or bloat a CGO_ENABLED=0 build;
// GOWORK is off: what is built is a module of its own, or this one alone.
func BuildStatic(ctx context.Context, dir, pkg, arch string) ([]byte, error) {
	return goBuild(ctx, dir, pkg, arch)
}

// BuildModule builds the main package made of files (name → content, at
// the root of a module of its own: a go.mod among them) into one static
// linux/arch binary, in a temporary folder. Nothing is fetched: the
// module may need the standard library only (GOPROXY=off), and the go
// tool found must be recent enough for its go.mod (GOTOOLCHAIN=local).
func BuildModule(ctx context.Context, files map[string][]byte, arch string) ([]byte, error) {
	if _, ok := files["go.mod"]; !ok {
		return nil, errors.New("build: the module's files have no go.mod")
	}
	dir, err := os.MkdirTemp("", "rightsize-module-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name != filepath.Base(name) || name == "." || name == ".." {
			return nil, fmt.Errorf("build: %q is not a file name", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o600); err != nil {
			return nil, err
		}
	}
	return goBuild(ctx, dir, ".", arch, "GOTOOLCHAIN=local", "GOPROXY=off")
}

func goBuild(ctx context.Context, dir, pkg, arch string, env ...string) ([]byte, error) {
	goTool, err := goCommand()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "rightsize-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "out")
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=", "GOWORK=off"), env...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s build %s for linux/%s: %w\n%s", goTool, pkg, arch, err, output)
	}
	return os.ReadFile(out)
}

// goRoots are where the go tool is looked for when it is not on the PATH.
var goRoots = func() []string { return []string{os.Getenv("GOROOT"), "/usr/local/go"} }

// goCommand finds the go tool. `go test` puts GOROOT/bin first on the PATH
// of the test binaries it runs.
func goCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	for _, root := range goRoots() {
		if root == "" {
			continue
		}
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (nor in $GOROOT/bin or /usr/local/go/bin): it builds the programs of the images made here", ErrNoGoTool)
}
