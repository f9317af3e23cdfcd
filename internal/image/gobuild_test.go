package image

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestBuildModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := BuildModule(ctx, map[string][]byte{
		"main.go": []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hi\") }\n"),
		"go.mod":  []byte("module m\n\ngo 1.22\n"),
	}, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("not an ELF executable: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked; an image FROM scratch needs it static")
		}
	}

	// A module asking for a newer Go than the go tool's fails, instead of
	// the go tool fetching that toolchain, whatever the user's setting.
	t.Setenv("GOTOOLCHAIN", "auto")
	_, err = BuildModule(ctx, map[string][]byte{
		"main.go": []byte("package main\n\nfunc main() {}\n"),
		"go.mod":  []byte("module m\n\ngo 1.999\n"),
	}, runtime.GOARCH)
	if err == nil || !strings.Contains(err.Error(), "GOTOOLCHAIN=local") {
		t.Errorf("a module for Go 1.999: %v; want the go tool refusing to fetch a toolchain", err)
	}
}

func TestBuildModuleRefuses(t *testing.T) {
	for _, files := range []map[string][]byte{
		{"main.go": nil},
		{"go.mod": nil, "../x.go": nil},
		{"go.mod": nil, "sub/x.go": nil},
		{"go.mod": nil, "..": nil},
	} {
		if _, err := BuildModule(context.Background(), files, "amd64"); err == nil {
			t.Errorf("BuildModule took the files %v", files)
		}
	}
}

func TestNoGoTool(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	saved := goRoots
	goRoots = func() []string { return nil }
	defer func() { goRoots = saved }()
	_, err := BuildModule(context.Background(), map[string][]byte{"go.mod": []byte("module m\n")}, "amd64")
	if !errors.Is(err, ErrNoGoTool) {
		t.Errorf("without a go tool: %v; want ErrNoGoTool", err)
	}
}
