package image

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// The copy out of BusyboxImage is tested here against the real engine in
// two halves, because the machine these tests run on (and CI) reaches no
// registry, so a pull can only fail there:
//
//   - TestPullFails: the pull of a tag that does not exist fails fast, with
//     the message a user without a registry sees, and leaves nothing behind.
//   - TestCopyOutOfImage: everything after the pull (create a container
//     without starting it, CopyFromContainer, the tar, the checks, the
//     cache, the container's removal) on images imported locally, which
//     the engine has before the call and so are not pulled and not removed.
//
// What is not tested here is a pull that succeeds, nor the removal of the
// image it pulled (removePulled): that needs a reachable registry. On a
// laptop, `RIGHTSIZE_BUSYBOX= go test ./internal/testimage` with no static
// /bin/busybox and an empty ~/.cache/rightsize/busybox goes through it.

// engineClient skips with RIGHTSIZE_SKIP_ENGINE_TESTS=1 and fails without an
// engine, as the other engine tests do.
func engineClient(t *testing.T) (*client.Client, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a container engine: skipped with -short")
	}
	if skip, _ := strconv.ParseBool(os.Getenv("RIGHTSIZE_SKIP_ENGINE_TESTS")); skip {
		t.Skip("RIGHTSIZE_SKIP_ENGINE_TESTS is set")
	}
	c, err := testcontainers.NewDockerClientWithOpts(t.Context())
	if err != nil {
		t.Fatalf("no Docker engine (run `make engine`, or set RIGHTSIZE_SKIP_ENGINE_TESTS=1): %v", err)
	}
	arch, err := EngineArch(t.Context(), c.Client)
	if err != nil {
		t.Fatal(err)
	}
	return c.Client, arch
}

// checkNoCopyContainer fails when a container this process made a copy
// through is still on the engine.
func checkNoCopyContainer(t *testing.T, cli *client.Client) {
	t.Helper()
	prefix := fmt.Sprintf("%s%d-", copyPrefix, os.Getpid())
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("name", prefix)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Items {
		t.Errorf("container %v (%s) is still on the engine: the copy must always remove its container", c.Names, c.ID[:12])
		_, _ = cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	}
}

func TestPullFails(t *testing.T) {
	cli, arch := engineClient(t)
	const ref = "busybox:0.0.0-rightsize-no-such-tag"
	if had, err := Present(t.Context(), cli, ref); err != nil || had {
		t.Fatalf("Present(%s) = %v, %v; this test needs it absent", ref, had, err)
	}
	dir := t.TempDir()
	f := imageFinder(dir, cli, ref, arch)
	start := time.Now()
	bb, err := f.find(t.Context())
	took := time.Since(start)
	if err == nil {
		t.Fatalf("find = %s from %s; want the pull of a tag that does not exist to fail", bb.Path, ref)
	}
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrNoBusybox) {
		t.Errorf("the error is not ErrNoBusybox: %v", err)
	}
	for _, want := range []string{
		"pulling " + ref, "Tried, in order", EnvBusybox + " (not set)", "(no such file)",
		"busybox-static", "set " + EnvBusybox, "make a registry reachable", "docker pull " + ref,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	// The engine gives up on a registry it cannot resolve or reach within
	// its own dial timeout (30 s); here, with no DNS for it, in
	// milliseconds.
	if took > time.Minute {
		t.Errorf("the failed pull took %s; want it to fail fast", took)
	}
	checkNoCopyContainer(t, cli)
	if had, err := Present(context.Background(), cli, ref); err != nil || had {
		t.Errorf("Present(%s) after the failed pull = %v, %v; want nothing left", ref, had, err)
	}
	if got, _ := filepath.Glob(filepath.Join(dir, "cache", "*")); len(got) > 0 {
		t.Errorf("a failed pull cached %q", got)
	}
}

func TestCopyOutOfImage(t *testing.T) {
	cli, arch := engineClient(t)
	var machine elf.Machine
	for m, a := range goarch {
		if a == arch {
			machine = m
		}
	}
	if machine == elf.EM_NONE {
		t.Skipf("no ELF machine known for the engine's %s", arch)
	}
	var other elf.Machine = elf.EM_AARCH64
	if arch == "arm64" {
		other = elf.EM_X86_64
	}
	static := fakeELF(t, machine, false)
	cases := []struct {
		name    string
		entries []Entry
		wantErr string // "" for a busybox
		reason  string
	}{
		{"static", []Entry{{Name: "bin", Mode: 0o755, Dir: true}, {Name: "bin/busybox", Mode: 0o755, Content: static}}, "",
			"an image's static busybox for the engine is copied out and cached"},
		{"dynamic", []Entry{{Name: "bin", Mode: 0o755, Dir: true}, {Name: "bin/busybox", Mode: 0o755, Content: fakeELF(t, machine, true)}}, "dynamically linked",
			"an image's busybox passes the host's checks"},
		{"another architecture", []Entry{{Name: "bin", Mode: 0o755, Dir: true}, {Name: "bin/busybox", Mode: 0o755, Content: fakeELF(t, other, false)}}, "but the engine runs " + arch + " containers",
			"it must run on this engine"},
		{"a link", []Entry{{Name: "bin", Mode: 0o755, Dir: true}, {Name: "bin/sh", Mode: 0o755, Content: static}, {Name: "bin/busybox", Link: "sh"}}, "symbolic link",
			"a link is not the executable"},
		{"none", []Entry{{Name: "etc", Mode: 0o755, Dir: true}}, "find the file",
			"an image without /bin/busybox: the copy fails after the create"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := fmt.Sprintf("rightsize-test/busybox-source:%d-%d", os.Getpid(), i)
			rootfs, err := Tarball(c.entries)
			if err != nil {
				t.Fatal(err)
			}
			if err := Import(t.Context(), cli, ref, rootfs, []string{"LABEL dev.rightsize.test-image=1"}, "rightsize-go internal/image test"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, err := cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
				if err != nil {
					t.Errorf("removing the test's image %s: %v", ref, err)
				}
			})
			dir := t.TempDir()
			f := imageFinder(dir, cli, ref, arch)
			bb, err := f.find(t.Context())
			if err != nil {
				t.Log(err)
			}
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("find: %v; want the busybox of %s: %s", err, ref, c.reason)
			case c.wantErr == "" && (bb.Source != FromImage || string(bb.Content) != string(static)):
				t.Errorf("find = %s, %d bytes; want the %d bytes put in the image: %s", bb.Source, len(bb.Content), len(static), c.reason)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("find = %v; want an error saying %q: %s", err, c.wantErr, c.reason)
			}
			checkNoCopyContainer(t, cli)
			if had, err := Present(context.Background(), cli, ref); err != nil || !had {
				t.Errorf("Present(%s) = %v, %v; an image the engine had before must stay", ref, had, err)
			}
		})
	}
}

// imageFinder is a finder with no system busybox, its cache and lock in
// dir, that copies busybox for arch out of image ref on cli's engine.
func imageFinder(dir string, cli *client.Client, ref, arch string) *finder {
	return &finder{
		system:   filepath.Join(dir, "bin", "busybox"),
		cacheDir: filepath.Join(dir, "cache"),
		image:    ref,
		lockPath: func() (string, error) { return filepath.Join(dir, "lock"), nil },
		arch:     func(context.Context) (string, error) { return arch, nil },
		fetch: func(ctx context.Context, arch string) ([]byte, error) {
			return copyFromImage(ctx, cli, ref, arch)
		},
	}
}
