// Package usermod builds test binaries the way a user of rightsize-go
// builds them, for the tests that kill them: a module of its own
// (testdata/module, example.com/usermodule) that requires this module,
// imports only its public packages as the README says, and is compiled
// with `go test -c`. The repository's own test binaries enter the library
// in ways a user's do not (a TestMain of the repository's, internal
// packages); a promise is proved only once it holds here too.
//
// The module's tests (package userkit) start what their environment asks
// for, write what they started to an info file, and block until killed:
// store's TestHolds, and TestCheckout/eu, a subtest whose place
// (CheckoutPlace) is what rightsize says made what it started; guarded's
// TestBuildsAndVolumes makes what sandboxtest does not (GuardAll's).
package usermod

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The module's packages: Store runs on the default backend (Docker, or
// Podman through DOCKER_HOST); Pods links backend/kubernetes for its
// effect, as docs/kubernetes.md says; Guarded guards its whole binary.
const (
	Store = "store"
	Pods  = "podstore"
	// Guarded's TestMain is sandboxtest.Main with GuardAll; its
	// TestBuildsAndVolumes builds an image, makes a container of it and
	// a named volume with plain testcontainers-go and the Docker client,
	// and says them (ReadInfo: Containers, Images, Volumes).
	Guarded = "guarded"
	// EnvTag is what Guarded labels what it makes with, and names its
	// volume after.
	EnvTag = "USER_TAG"
)

// The environment of the module's tests (userkit's).
const (
	EnvImage     = "USER_IMAGE"
	EnvCmd       = "USER_CMD"
	EnvSandboxes = "USER_SANDBOXES"
	EnvNetwork   = "USER_NETWORK"
	EnvInfo      = "USER_INFO"
	EnvPass      = "USER_PASS"
	EnvVolume    = "USER_VOLUME"
	EnvBuild     = "USER_BUILD"
	// KeepAlive's (userkit.KeepAlive, the module's TestKeepAlive).
	EnvKeepAlives = "USER_KEEPALIVES"
	EnvReuseTTL   = "USER_REUSE_TTL"
	EnvGo         = "USER_GO"
)

// CheckoutPlace is file:line of store's TestCheckout/eu's call of Hold,
// read from the module's source.
func CheckoutPlace() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "internal", "usermod", "testdata", "module", Store, "store_test.go"))
	if err != nil {
		return "", err
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "// the place of TestCheckout/eu") {
			return fmt.Sprintf("store_test.go:%d", i+1), nil
		}
	}
	return "", errors.New("usermod: store_test.go says no place of TestCheckout/eu")
}

// Module returns the folder of a fresh copy of the user's module, in t's
// temporary folder, whose replace names this repository, tidied.
func Module(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := prepare(dir); err != nil {
		t.Fatalf("usermod: preparing the user's module: %v", err)
	}
	return dir
}

// Build returns the path of pkg's test binary (Store, Pods or Guarded), built in a
// fresh copy of the module. Go's build cache makes all but the first build
// a link. A failure to build fails t.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	dir := Module(t)
	bin := filepath.Join(dir, "bin", pkg+".test")
	start := time.Now()
	if out, err := Go(dir, "test", "-c", "-o", bin, "./"+pkg).CombinedOutput(); err != nil {
		t.Fatalf("usermod: go test -c ./%s in the user's module: %v\n%s", pkg, err, out)
	}
	t.Logf("usermod: built the user's %s test binary in %s", pkg, time.Since(start).Round(time.Millisecond))
	return bin
}

// prepare copies the module to a folder of its own, points its replace at
// this repository and tidies it (go.sum starts from the repository's: the
// user's module needs nothing the repository does not).
func prepare(dir string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	src := filepath.Join(root, "internal", "usermod", "testdata", "module")
	if err := copyTree(src, dir); err != nil {
		return err
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	var out []string
	for _, l := range strings.Split(string(mod), "\n") {
		if strings.HasPrefix(l, "replace github.com/rightsize/rightsize-go =>") {
			l = "replace github.com/rightsize/rightsize-go => " + root
		}
		out = append(out, l)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(strings.Join(out, "\n")), 0o644); err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		return err
	}
	if out, err := Go(dir, "mod", "tidy").CombinedOutput(); err != nil {
		return fmt.Errorf("go mod tidy: %v\n%s", err, out)
	}
	return nil
}

// Go is the go command in dir, as a user runs it there: outside any
// workspace, with the module cache and proxy the repository's build uses.
func Go(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	return cmd
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	// go test puts GOROOT/bin on the PATH of what it runs; outside it,
	// the toolchain's usual home.
	return filepath.Join(cmp.Or(os.Getenv("GOROOT"), "/usr/local/go"), "bin", "go")
}

// repoRoot finds this repository's root from this source file's folder.
func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("usermod: cannot locate its own source")
	}
	dir := filepath.Dir(file)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/rightsize/rightsize-go\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("usermod: the repository's go.mod is not above " + filepath.Dir(file))
		}
		dir = parent
	}
}

func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// Info is what a user's test said it started.
type Info struct {
	Network   string
	Sandboxes []string
	// Containers, Images and Volumes are what Guarded made past
	// sandboxtest: container and image ids, volume names; Volumes also
	// holds the sandboxtest.NewVolume of a test run with EnvVolume, and
	// Images the sandboxtest.NewImage (by name) of one run with EnvBuild.
	Containers, Images, Volumes []string
	// KeepAlives are the keep-alive sandboxes it started or adopted:
	// their container ids by name.
	KeepAlives map[string]string
	Blocked    bool
}

// ReadInfo reads the info file a user's test writes.
func ReadInfo(path string) (Info, error) {
	var in Info
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return in, nil
	}
	if err != nil {
		return in, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "network":
			in.Network = v
		case "sandbox":
			in.Sandboxes = append(in.Sandboxes, v)
		case "container":
			in.Containers = append(in.Containers, v)
		case "image":
			in.Images = append(in.Images, v)
		case "volume":
			in.Volumes = append(in.Volumes, v)
		case "keepalive":
			name, id, _ := strings.Cut(v, " ")
			if in.KeepAlives == nil {
				in.KeepAlives = map[string]string{}
			}
			in.KeepAlives[name] = id
		case "blocked":
			in.Blocked = true
		}
	}
	return in, sc.Err()
}

// WaitBlocked polls path until the test says it started everything, the
// process ended (done is closed), or within. It returns what the test said.
func WaitBlocked(path string, done <-chan struct{}, within time.Duration) (Info, error) {
	deadline := time.Now().Add(within)
	for {
		in, err := ReadInfo(path)
		if err != nil || in.Blocked {
			return in, err
		}
		select {
		case <-done:
			return in, errors.New("usermod: the user's test ended before it had started everything")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return in, fmt.Errorf("usermod: the user's test had not started everything within %s (it said %+v)", within, in)
		}
	}
}
