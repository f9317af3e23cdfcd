package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTarball(t *testing.T) {
	b, err := Tarball([]Entry{
		{Name: "bin", Mode: 0o755, Dir: true},
		{Name: "bin/busybox", Mode: 0o755, Content: []byte("exe")},
		{Name: "bin/sh", Link: "busybox"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got = append(got, fmt.Sprintf("%c %s %o %q %s", h.Typeflag, h.Name, h.Mode, body, h.Linkname))
	}
	want := []string{
		`5 bin/ 755 "" `,
		`0 bin/busybox 755 "exe" `,
		`2 bin/sh 777 "" busybox`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tarball holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	again, _ := Tarball([]Entry{
		{Name: "bin", Mode: 0o755, Dir: true},
		{Name: "bin/busybox", Mode: 0o755, Content: []byte("exe")},
		{Name: "bin/sh", Link: "busybox"},
	})
	if !bytes.Equal(b, again) {
		t.Error("the same entries gave two different archives; a layer must not depend on when it is built")
	}
}

func TestReadBusyboxRefuses(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, want, reason string
	}{
		{filepath.Join(dir, "nowhere"), "no such file", "a missing file says so"},
		{notELF, "not an ELF executable", "a script cannot be PID 1 of an image without a shell"},
	}
	for _, p := range []string{"/bin/sh", "/bin/ls", "/usr/bin/env"} {
		if f, err := elf.Open(p); err == nil {
			for _, prog := range f.Progs {
				if prog.Type == elf.PT_INTERP {
					cases = append(cases, struct{ path, want, reason string }{p, "dynamically linked", "a dynamic executable finds no loader FROM scratch"})
					break
				}
			}
			f.Close()
			break
		}
	}
	for _, c := range cases {
		_, err := ReadBusybox(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadBusybox(%s) = %v; want an error containing %q: %s", c.path, err, c.want, c.reason)
		}
	}
}

func TestBusyboxEntries(t *testing.T) {
	bb := &Busybox{Path: "/bin/busybox", Content: []byte("exe"), Machine: elf.EM_X86_64}
	if bb.Arch() != "amd64" {
		t.Errorf("Arch() = %q, want amd64", bb.Arch())
	}
	if err := bb.CheckArch("arm64"); err == nil {
		t.Error("CheckArch(arm64) of an x86-64 busybox = nil; want an error, as it cannot run there")
	}
	var names []string
	for _, e := range bb.Entries([]string{"sh", "sleep"}) {
		names = append(names, e.Name+"->"+e.Link)
	}
	want := "bin->,bin/busybox->,etc->,bin/sh->busybox,bin/sleep->busybox"
	if got := strings.Join(names, ","); got != want {
		t.Errorf("Entries = %s, want %s", got, want)
	}
}

func TestApplets(t *testing.T) {
	if _, err := os.Stat(DefaultBusybox); err != nil {
		t.Skipf("no %s here (`make engine` installs one): %v", DefaultBusybox, err)
	}
	bb, err := ReadBusybox(DefaultBusybox)
	if err != nil {
		t.Skipf("%s is not a static busybox: %v", DefaultBusybox, err)
	}
	applets, err := bb.Applets(t.Context(), []string{"sh", "sleep"})
	if err != nil {
		t.Fatal(err)
	}
	if len(applets) < 2 {
		t.Errorf("Applets = %q; want at least sh and sleep", applets)
	}
	// A copy under another name, as FindBusybox caches it, lists the same.
	renamed := filepath.Join(t.TempDir(), cacheName(BusyboxImage, "amd64"))
	if err := os.WriteFile(renamed, bb.Content, 0o755); err != nil {
		t.Fatal(err)
	}
	again, err := (&Busybox{Path: renamed, Content: bb.Content}).Applets(t.Context(), nil)
	if err != nil || len(again) != len(applets) {
		t.Errorf("Applets of a copy named %s: %d applets (%v); want the %d of %s", filepath.Base(renamed), len(again), err, len(applets), DefaultBusybox)
	}
	if _, err := bb.Applets(t.Context(), []string{"no-such-applet"}); err == nil {
		t.Error("Applets with a required applet busybox lacks = nil error")
	}
}
