package image

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/moby/moby/client"
)

// fakeELF is the smallest ELF executable debug/elf reads: a header and its
// program headers, with a PT_INTERP (a dynamic loader) when dynamic. It
// cannot run; ReadBusybox does not run what it reads.
func fakeELF(t testing.TB, m elf.Machine, dynamic bool) []byte {
	t.Helper()
	progs := []elf.Prog64{{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X)}}
	interp := []byte("/lib/ld-linux.so.2\x00")
	if dynamic {
		progs = append([]elf.Prog64{{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R), Filesz: uint64(len(interp))}}, progs...)
		progs[0].Off = uint64(64 + 56*len(progs))
	}
	hdr := elf.Header64{
		Ident:     [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(m),
		Version:   uint32(elf.EV_CURRENT),
		Phoff:     64,
		Ehsize:    64,
		Phentsize: 56,
		Phnum:     uint16(len(progs)),
	}
	var buf bytes.Buffer
	for _, v := range []any{hdr, progs} {
		if err := binary.Write(&buf, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	if dynamic {
		buf.Write(interp)
	}
	return buf.Bytes()
}

func TestFakeELF(t *testing.T) {
	dir := t.TempDir()
	for _, dynamic := range []bool{false, true} {
		p := filepath.Join(dir, fmt.Sprint(dynamic))
		if err := os.WriteFile(p, fakeELF(t, elf.EM_AARCH64, dynamic), 0o755); err != nil {
			t.Fatal(err)
		}
		bb, err := ReadBusybox(p)
		switch {
		case dynamic && (err == nil || !strings.Contains(err.Error(), "dynamically linked")):
			t.Errorf("a fake dynamic ELF: ReadBusybox = %v; want it refused as dynamically linked", err)
		case !dynamic && err != nil:
			t.Errorf("a fake static ELF: ReadBusybox = %v; want it accepted", err)
		case !dynamic && bb.Arch() != "arm64":
			t.Errorf("a fake static aarch64 ELF: Arch() = %q, want arm64", bb.Arch())
		}
	}
}

// TestFindOrder: the places FindBusybox looks, in order, with files
// standing for each (the pull is a function here; fetch_test.go has the
// real one).
func TestFindOrder(t *testing.T) {
	const arch = "amd64"
	static := fakeELF(t, elf.EM_X86_64, false)
	dynamic := fakeELF(t, elf.EM_X86_64, true)
	otherArch := fakeELF(t, elf.EM_AARCH64, false)
	fetched := append(fakeELF(t, elf.EM_X86_64, false), "pulled"...)
	errPull := errors.New(`Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host`)
	errEngine := fmt.Errorf("%w: dial unix /var/run/docker.sock: connect: no such file or directory", ErrNoEngine)

	type file []byte // nil: no file there
	cases := []struct {
		name        string
		env         file // RIGHTSIZE_BUSYBOX: nil leaves it unset
		envMissing  bool // RIGHTSIZE_BUSYBOX set to a path with no file
		system      file
		cache       file
		noCacheDir  bool
		archErr     error
		fetch       file
		fetchErr    error
		wantSource  string
		wantContent file
		wantErr     []string // substrings of the error, when one is wanted
		wantIs      error
		wantArch    bool // the engine was asked its architecture
		wantFetch   bool
		wantCached  file // what the cache holds afterwards (nil: nothing)
		reason      string
	}{
		{name: "env wins over a static /bin/busybox", env: static, system: append(fakeELF(t, elf.EM_X86_64, false), 's'), cache: static,
			wantSource: FromEnv, wantContent: static, wantCached: static,
			reason: "RIGHTSIZE_BUSYBOX is the user's choice and comes first; no engine is needed for it"},
		{name: "env dynamic is refused, nothing else tried", env: dynamic, system: static,
			wantErr: []string{EnvBusybox, "dynamically linked", "unset it"}, wantIs: ErrNoBusybox,
			reason: "falling back to another busybox would hide that the one the user named is unusable"},
		{name: "env names no file", envMissing: true, system: static,
			wantErr: []string{EnvBusybox, "no such file"}, wantIs: ErrNoBusybox,
			reason: "a typo in the variable is said plainly"},
		{name: "static /bin/busybox, no engine asked", system: static, archErr: errEngine,
			wantSource: FromSystem, wantContent: static,
			reason: "the CI machine's busybox-static: nothing needs the engine, nothing is pulled"},
		{name: "dynamic /bin/busybox refused, the cache used", system: dynamic, cache: static,
			wantSource: FromCache, wantContent: static, wantArch: true, wantCached: static,
			reason: "Debian's dynamic busybox cannot run FROM scratch; an earlier copy can"},
		{name: "a script at /bin/busybox refused, the cache used", system: file("#!/bin/sh\n"), cache: static,
			wantSource: FromCache, wantContent: static, wantArch: true, wantCached: static,
			reason: "anything but a static ELF is passed over"},
		{name: "no /bin/busybox: pulled, checked and cached", system: nil,
			fetch: fetched, wantSource: FromImage, wantContent: fetched, wantArch: true, wantFetch: true, wantCached: fetched,
			reason: "a laptop's first run copies the busybox out of the image, and keeps it for the next"},
		{name: "a cached copy for another architecture is replaced", system: nil, cache: otherArch,
			fetch: fetched, wantSource: FromImage, wantContent: fetched, wantArch: true, wantFetch: true, wantCached: fetched,
			reason: "a copy that cannot run on this engine is no copy"},
		{name: "a dynamic busybox out of the image is refused", system: dynamic,
			fetch: dynamic, wantErr: []string{"dynamically linked", BusyboxImage}, wantIs: ErrNoBusybox, wantArch: true, wantFetch: true,
			reason: "the copy passes the same checks as a host busybox, and is not cached when it fails them"},
		{name: "a busybox for another architecture out of the image is refused", system: nil,
			fetch: otherArch, wantErr: []string{"arm64", "amd64"}, wantIs: ErrNoBusybox, wantArch: true, wantFetch: true,
			reason: "the engine's architecture is the one that counts"},
		{name: "the pull fails: what was tried, and how to fix it", system: dynamic,
			fetchErr: errPull, wantArch: true, wantFetch: true, wantIs: ErrNoBusybox,
			wantErr: []string{
				EnvBusybox + " (not set)", "/busybox (it is dynamically linked", "the cached copy", "(no such file)",
				"copying /bin/busybox out of " + BusyboxImage, "no such host",
				"apt-get install busybox-static", "set " + EnvBusybox, "make a registry reachable", "docker pull " + BusyboxImage,
			},
			reason: "no registry (this machine, CI): every place is named with why it failed, then the three fixes"},
		{name: "no engine", system: nil, archErr: errEngine,
			wantIs: ErrNoEngine, wantErr: []string{"no such file", BusyboxImage, "needs the engine"}, wantArch: true,
			reason: "the caller adds its own advice on getting an engine"},
		{name: "no user cache folder: nothing pulled", system: nil, noCacheDir: true,
			wantIs: ErrNoBusybox, wantErr: []string{"no user cache folder", "HOME is not set"}, wantArch: true,
			reason: "a copy that cannot be kept would be pulled again every run"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			put := func(name string, content file) string {
				p := filepath.Join(dir, name)
				if content != nil {
					if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, content, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				return p
			}
			cacheDir := filepath.Join(dir, "cache", "rightsize", "busybox")
			cached := filepath.Join(cacheDir, cacheName(BusyboxImage, arch))
			put(filepath.Join("cache", "rightsize", "busybox", cacheName(BusyboxImage, arch)), c.cache)
			var asked, fetches int
			f := &finder{
				system:   put("bin/busybox", c.system),
				cacheDir: cacheDir,
				image:    BusyboxImage,
				lockPath: func() (string, error) { return filepath.Join(dir, "lock"), nil },
				arch: func(context.Context) (string, error) {
					asked++
					return arch, c.archErr
				},
				fetch: func(context.Context, string) ([]byte, error) {
					fetches++
					return c.fetch, c.fetchErr
				},
			}
			if c.env != nil {
				f.env = put("env/busybox", c.env)
			} else if c.envMissing {
				f.env = filepath.Join(dir, "env", "nowhere")
			}
			if c.noCacheDir {
				f.cacheDir, f.noCache = "", errors.New("neither $XDG_CACHE_HOME nor $HOME are defined: HOME is not set")
			}

			bb, err := f.find(t.Context())
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("find: %v; want a busybox from %s: %s", err, c.wantSource, c.reason)
				}
				if bb.Source != c.wantSource || !bytes.Equal(bb.Content, c.wantContent) {
					t.Errorf("find = %s (%d bytes); want %s (%d bytes): %s", bb.Source, len(bb.Content), c.wantSource, len(c.wantContent), c.reason)
				}
				if got, err := os.ReadFile(bb.Path); err != nil || !bytes.Equal(got, bb.Content) {
					t.Errorf("Path %s does not hold the busybox returned (%v): Applets runs it", bb.Path, err)
				}
			} else {
				if err == nil {
					t.Fatalf("find = %s; want an error: %s", bb.Source, c.reason)
				}
				for _, want := range c.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the error does not say %q: %s\n%v", want, c.reason, err)
					}
				}
				if !errors.Is(err, c.wantIs) {
					t.Errorf("the error is not %v: %v", c.wantIs, err)
				}
			}
			if (asked > 0) != c.wantArch {
				t.Errorf("the engine was asked its architecture %d times; want asked=%v", asked, c.wantArch)
			}
			if (fetches > 0) != c.wantFetch {
				t.Errorf("fetched %d times; want fetched=%v", fetches, c.wantFetch)
			}
			got, err := os.ReadFile(cached)
			if c.wantCached == nil && err == nil {
				t.Errorf("the cache holds %d bytes; want nothing cached", len(got))
			}
			if c.wantCached != nil && !bytes.Equal(got, c.wantCached) {
				t.Errorf("the cache holds %d bytes (%v); want the %d bytes of the busybox", len(got), err, len(c.wantCached))
			}
			if c.wantCached != nil && runtime.GOOS != "windows" {
				if fi, err := os.Stat(cached); err != nil || fi.Mode().Perm()&0o100 == 0 {
					t.Errorf("the cached copy is not executable (%v, %v): Applets runs it", fi.Mode(), err)
				}
			}
			if leftovers, _ := filepath.Glob(filepath.Join(cacheDir, ".*")); len(leftovers) > 0 {
				t.Errorf("temporary files left in the cache: %q", leftovers)
			}
		})
	}
}

// TestFindBusyboxEnv: FindBusybox reads RIGHTSIZE_BUSYBOX, and does not
// connect to the engine for a busybox it does not need one for.
func TestFindBusyboxEnv(t *testing.T) {
	p := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(p, fakeELF(t, elf.EM_X86_64, false), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBusybox, p)
	bb, err := FindBusybox(t.Context(), func() (*client.Client, error) {
		t.Error("FindBusybox connected to the engine for RIGHTSIZE_BUSYBOX")
		return nil, errors.New("no engine here")
	})
	if err != nil || bb.Source != FromEnv || bb.Path != p {
		t.Fatalf("FindBusybox with %s=%s = %+v, %v; want that file", EnvBusybox, p, bb, err)
	}
}

func TestCacheName(t *testing.T) {
	for ref, want := range map[string]string{
		"busybox:1.37.0-musl":                "1.37.0-musl-arm64",
		"localhost:5000/busybox:1.37.0-musl": "1.37.0-musl-arm64",
	} {
		if got := cacheName(ref, "arm64"); got != want {
			t.Errorf("cacheName(%s, arm64) = %s, want %s", ref, got, want)
		}
	}
}

// TestBusyboxImageNamed: the shell script and the README name the image
// this package pulls; a new tag here must not leave them behind.
func TestBusyboxImageNamed(t *testing.T) {
	for _, p := range []string{"../../scripts/engine.sh", "../../README.md"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(BusyboxImage)) {
			t.Errorf("%s does not name %s, the image a busybox is copied out of", p, BusyboxImage)
		}
	}
}
