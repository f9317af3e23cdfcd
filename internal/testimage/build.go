package testimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/gofrs/flock"
	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/jsonmessage"
	"github.com/testcontainers/testcontainers-go"
)

const (
	kindBusybox = "busybox"
	kindNoShell = "noshell"

	repository = "rightsize-test/"
	// layout is part of every tag: change it whenever the way an image is
	// assembled changes, so that the engine's older image is not reused.
	layout = "1"

	defaultBusybox = "/bin/busybox"
	serverPackage  = "github.com/rightsize/rightsize-go/internal/testimage/server"
	buildTimeout   = 3 * time.Minute
	fixHint        = "run `make engine` (as root on Debian it installs and starts dockerd and busybox-static)"
)

// serverSource is hashed into every tag, so that a change to the server
// gives new images.
//
//go:embed server/*.go
var serverSource embed.FS

// requiredApplets are linked even when `busybox --list` cannot run here (a
// busybox for another architecture), and must be in its list when it can.
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

	var bb *busyboxFile
	if kind == kindBusybox {
		var err error
		if bb, err = readBusybox(); err != nil {
			return "", err
		}
	}
	ref := repository + kind + ":" + tag(kind, bb)

	cli, err := engine()
	if err != nil {
		return "", err
	}
	if ok, err := present(ctx, cli, ref); ok || err != nil {
		return ref, err
	}

	// Test binaries of several packages get here at the same moment; one
	// builds, the others wait and then find its image.
	lock := flock.New(filepath.Join(os.TempDir(), "rightsize-testimage.lock"), flock.SetPermissions(0o666))
	if _, err := lock.TryLockContext(ctx, 50*time.Millisecond); err != nil {
		return "", fmt.Errorf("testimage: waiting for the build lock %s: %w", lock.Path(), err)
	}
	defer func() { _ = lock.Unlock() }()
	if ok, err := present(ctx, cli, ref); ok || err != nil {
		return ref, err
	}

	if err := build(ctx, cli, kind, ref, bb); err != nil {
		return "", fmt.Errorf("testimage: building %s: %w", ref, err)
	}
	if ok, err := present(ctx, cli, ref); !ok && err == nil {
		return "", fmt.Errorf("testimage: %s was imported but the engine does not list it", ref)
	} else if err != nil {
		return "", err
	}
	return ref, nil
}

// tag hashes what goes into an image of that kind. The server binary itself
// is not hashed: building it costs a go build, and the fast path must not.
// Its source and the Go version stand for it.
func tag(kind string, bb *busyboxFile) string {
	h := sha256.New()
	fmt.Fprintf(h, "layout %s\nkind %s\ngo %s\n", layout, kind, runtime.Version())
	if bb != nil {
		fmt.Fprintf(h, "busybox %x\n", sha256.Sum256(bb.content))
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
// that the images are where the tests' containers will be created.
func engine() (*client.Client, error) {
	engineOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			engineOnce.err = noEngine(err)
			return
		}
		engineOnce.cli = c.Client
	})
	return engineOnce.cli, engineOnce.err
}

func noEngine(err error) error {
	return fmt.Errorf("testimage: no Docker engine answers (%w); engine tests need one: %s, or point DOCKER_HOST at one, or set %s=1 to skip these tests", err, fixHint, EnvSkip)
}

func present(ctx context.Context, cli *client.Client, ref string) (bool, error) {
	_, err := cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	case client.IsErrConnectionFailed(err):
		return false, noEngine(err)
	default:
		return false, fmt.Errorf("testimage: inspecting %s: %w", ref, err)
	}
}

type busyboxFile struct {
	path    string
	content []byte
	machine elf.Machine
}

func readBusybox() (*busyboxFile, error) {
	path := defaultBusybox
	if p := os.Getenv(EnvBusybox); p != "" {
		path = p
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("testimage: the busybox image needs a static Linux busybox at %s: %s; %s, or set %s to the path of one",
			path, fmt.Sprintf(format, a...), fixHint, EnvBusybox)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fail("%v", err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fail("not an ELF executable (%v)", err)
	}
	// A dynamic busybox (Debian's "busybox" package) finds no loader in an
	// image built FROM scratch and fails with a baffling "no such file".
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fail("it is dynamically linked (install busybox-static, not busybox)")
		}
	}
	return &busyboxFile{path: path, content: b, machine: f.Machine}, nil
}

// goarch is the engine architecture (in GOARCH terms) a busybox runs on.
var goarch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_386:     "386",
	elf.EM_ARM:     "arm",
	elf.EM_RISCV:   "riscv64",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
}

func build(ctx context.Context, cli *client.Client, kind, ref string, bb *busyboxFile) error {
	ver, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return fmt.Errorf("asking the engine its version: %w", err)
	}
	if ver.Os != "linux" {
		return fmt.Errorf("the engine runs %s containers; the test images are Linux images", ver.Os)
	}
	server, err := buildServer(ctx, ver.Arch)
	if err != nil {
		return err
	}

	files := []entry{
		{name: "server", mode: 0o755, content: server},
		{name: "tmp", mode: 0o1777, dir: true},
	}
	changes := []string{"LABEL " + Label + "=1"}
	switch kind {
	case kindBusybox:
		if arch := goarch[bb.machine]; arch != ver.Arch {
			return fmt.Errorf("%s is built for %s (%s) but the engine runs %s containers", bb.path, bb.machine, arch, ver.Arch)
		}
		applets, err := appletsOf(ctx, bb.path)
		if err != nil {
			return err
		}
		files = append(files,
			entry{name: "bin", mode: 0o755, dir: true},
			entry{name: "bin/busybox", mode: 0o755, content: bb.content},
			entry{name: "etc", mode: 0o755, dir: true},
		)
		for _, a := range applets {
			files = append(files, entry{name: "bin/" + a, link: "busybox"})
		}
		changes = append(changes,
			"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			`CMD ["sleep", "3600"]`)
	case kindNoShell:
		changes = append(changes, `CMD ["`+ServerPath+`"]`)
	default:
		return fmt.Errorf("no image kind %q", kind)
	}

	rootfs, err := tarball(files)
	if err != nil {
		return err
	}
	// An import, not a build: one layer, no builder (BuildKit or legacy)
	// involved, nothing pulled, and the same call from API 1.40 on.
	resp, err := cli.ImageImport(ctx,
		client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"},
		ref,
		client.ImageImportOptions{Changes: changes, Message: "rightsize-go internal/testimage"})
	if err != nil {
		return fmt.Errorf("importing the root file system: %w", err)
	}
	defer resp.Close()
	if err := jsonmessage.DisplayStream(resp, io.Discard); err != nil {
		return fmt.Errorf("importing the root file system: %w", err)
	}
	return nil
}

// buildServer builds ./server for linux/arch and returns the executable.
func buildServer(ctx context.Context, arch string) ([]byte, error) {
	goTool, err := goCommand()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rightsize-testimage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "server")
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-ldflags=-s -w", "-o", out, serverPackage)
	// GOFLAGS is cleared: a -race or -cover meant for the tests would fail
	// or bloat a CGO_ENABLED=0 build.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=")
	if output, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s build %s for linux/%s: %w\n%s", goTool, serverPackage, arch, err, output)
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
	return "", errors.New("testimage: the go tool is not on the PATH; it builds the test images' /server")
}

// appletsOf lists the applets of the busybox at path, each to be a link in
// /bin. A busybox that cannot run here (another architecture) gets the
// required ones only.
func appletsOf(ctx context.Context, path string) ([]string, error) {
	out, err := exec.CommandContext(ctx, path, "--list").Output()
	if err != nil {
		return requiredApplets, nil
	}
	var applets []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		a := strings.TrimSpace(sc.Text())
		if a != "" && a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	for _, a := range requiredApplets {
		if !slices.Contains(applets, a) {
			return nil, fmt.Errorf("%s has no %q applet, which the tests use", path, a)
		}
	}
	return applets, nil
}

// entry is one file, directory (dir) or symbolic link (link) of a root
// file system.
type entry struct {
	name    string
	mode    int64
	dir     bool
	link    string
	content []byte
}

func tarball(entries []entry) ([]byte, error) {
	// A fixed time, so that the same inputs give the same layer.
	mtime := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mtime, Typeflag: tar.TypeReg, Size: int64(len(e.content))}
		switch {
		case e.dir:
			h.Typeflag, h.Name, h.Size = tar.TypeDir, e.name+"/", 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Mode, h.Size = tar.TypeSymlink, e.link, 0o777, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.content); err != nil {
				return nil, fmt.Errorf("tar %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
