package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildStatic builds Go package pkg (as the go tool names it, from dir;
// "" is this process's folder) into one static linux/arch binary and
// returns it, for an image made FROM scratch. GOFLAGS is cleared: a -race
// or -cover meant for the tests would fail or bloat a CGO_ENABLED=0 build;
// GOWORK is off: what is built is a module of its own, or this one alone.
func BuildStatic(ctx context.Context, dir, pkg, arch string) ([]byte, error) {
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
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=", "GOWORK=off")
	if output, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s build %s for linux/%s: %w\n%s", goTool, pkg, arch, err, output)
	}
	return os.ReadFile(out)
}

// goCommand finds the go tool. `go test` puts GOROOT/bin first on the PATH
// of the test binaries it runs.
func goCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	for _, root := range []string{os.Getenv("GOROOT"), "/usr/local/go"} {
		if root == "" {
			continue
		}
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("the go tool is not on the PATH (it builds the binaries of the test images)")
}
