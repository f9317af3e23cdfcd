package image

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// DefaultBusybox is where Debian's busybox-static package puts a static
// busybox.
const DefaultBusybox = "/bin/busybox"

// Busybox is a static Linux busybox: read from this machine, or copied out
// of BusyboxImage (see FindBusybox).
type Busybox struct {
	Path    string
	Content []byte
	Machine elf.Machine
	// Source says which of FindBusybox's places it came from (one of the
	// From… constants); "" when read with ReadBusybox directly.
	Source string
}

// ReadBusybox reads the busybox at path and checks that it can run in an
// image built FROM scratch: an ELF executable with no dynamic loader. The
// error says what is wrong with it, not how to get another one: that
// advice is the caller's.
func ReadBusybox(path string) (*Busybox, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseBusybox(path, b)
}

// parseBusybox is ReadBusybox's check, for content read from anywhere: a
// file of this machine or a copy out of an image.
func parseBusybox(path string, b []byte) (*Busybox, error) {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not an ELF executable (%v)", err)
	}
	// A dynamic busybox (Debian's "busybox" package) finds no loader in an
	// image built FROM scratch and fails with a baffling "no such file".
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("it is dynamically linked (install busybox-static, not busybox)")
		}
	}
	return &Busybox{Path: path, Content: b, Machine: f.Machine}, nil
}

// goarch is the engine architecture (in GOARCH terms) an ELF machine runs on.
var goarch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_386:     "386",
	elf.EM_ARM:     "arm",
	elf.EM_RISCV:   "riscv64",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
}

// Arch is the architecture, in GOARCH terms, the busybox runs on ("" when
// unknown).
func (b *Busybox) Arch() string { return goarch[b.Machine] }

// CheckArch fails when the busybox cannot run on an engine whose
// containers are of architecture arch (see EngineArch).
func (b *Busybox) CheckArch(arch string) error {
	if a := b.Arch(); a != arch {
		return fmt.Errorf("%s is built for %s (%s) but the engine runs %s containers", b.Path, b.Machine, a, arch)
	}
	return nil
}

// Applets lists the busybox's applets, each to be a link in /bin; every one
// of required must be among them. A busybox that cannot run here (another
// architecture) gets the required ones only.
func (b *Busybox) Applets(ctx context.Context, required []string) ([]string, error) {
	cmd := exec.CommandContext(ctx, b.Path, "--list")
	// busybox takes the applet from its name: a copy named otherwise (the
	// cached 1.37.0-musl-amd64, a RIGHTSIZE_BUSYBOX of any name) answers
	// "applet not found" unless told it is busybox.
	cmd.Args[0] = "busybox"
	out, err := cmd.Output()
	if err != nil {
		return slices.Clone(required), nil
	}
	var applets []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		a := strings.TrimSpace(sc.Text())
		if a != "" && a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	for _, a := range required {
		if !slices.Contains(applets, a) {
			return nil, fmt.Errorf("%s has no %q applet", b.Path, a)
		}
	}
	return applets, nil
}

// Entries are the busybox's part of a root file system: /bin/busybox, a
// link to it in /bin for every applet, and an empty /etc.
func (b *Busybox) Entries(applets []string) []Entry {
	out := []Entry{
		{Name: "bin", Mode: 0o755, Dir: true},
		{Name: "bin/busybox", Mode: 0o755, Content: b.Content},
		{Name: "etc", Mode: 0o755, Dir: true},
	}
	for _, a := range applets {
		out = append(out, Entry{Name: "bin/" + a, Link: "busybox"})
	}
	return out
}

// PathEnv is the ENV instruction a busybox image needs for its applets to
// be found by name.
const PathEnv = "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
