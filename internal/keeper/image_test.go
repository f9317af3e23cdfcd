package keeper

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/image"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// maxImageBytes is the image's size budget: about 10 MB.
const maxImageBytes = 10 << 20

// testRepo is a repository of the test's own, so that the build is from
// nothing whatever the engine has cached; the test removes it.
func testRepo(t *testing.T, r *rig) string {
	t.Helper()
	repo := "rightsize-keeper-test-" + r.id
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := r.cli.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("reference", repo)})
		if err != nil {
			t.Errorf("cleanup: list %s: %v", repo, err)
			return
		}
		for _, im := range res.Items {
			for _, ref := range im.RepoTags {
				if _, err := r.cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{}); err != nil && !gone(err) {
					t.Errorf("cleanup: remove %s: %v", ref, err)
				}
			}
		}
	})
	return repo
}

// The image is built FROM scratch out of the one binary, nothing pulled:
// its one layer is exactly the archive of the program built here. It is
// labelled, small, and reused the second time.
func TestImage(t *testing.T) {
	r := newRig(t)
	repo := testRepo(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	start := time.Now()
	ref, built, err := ensure(ctx, r.cli, repo)
	first := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !built {
		t.Fatalf("%s was found, not built: the test's repository is its own", ref)
	}
	start = time.Now()
	again, built, err := ensure(ctx, r.cli, repo)
	second := time.Since(start)
	if err != nil || again != ref || built {
		t.Fatalf("the second ensure: %q, built %v, %v; want %q reused", again, built, err, ref)
	}
	t.Logf("the image %s: built in %s, found again in %s", ref, first.Round(time.Millisecond), second.Round(time.Millisecond))

	res, err := r.cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("its size: %d bytes (%.2f MB)", res.Size, float64(res.Size)/1e6)
	if res.Size <= 0 || res.Size > maxImageBytes {
		t.Errorf("the image is %d bytes; the budget is %d", res.Size, maxImageBytes)
	}
	if res.Config == nil || res.Config.Labels[LabelImage] != "1" {
		t.Errorf("the image is not labelled %s=1: %+v", LabelImage, res.Config)
	}
	if res.Config == nil || strings.Join(res.Config.Entrypoint, " ") != programPath {
		t.Errorf("the image's entry point is %v, want %s", res.Config.Entrypoint, programPath)
	}
	// Its one layer's digest is that of the archive of the program as it
	// builds here: no base image, nothing else in it.
	arch, err := image.EngineArch(ctx, r.cli)
	if err != nil {
		t.Fatal(err)
	}
	program, err := buildProgram(ctx, arch)
	if err != nil {
		t.Fatal(err)
	}
	layer, err := rootfs(program)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(layer)
	want := "sha256:" + hex.EncodeToString(sum[:])
	if got := res.RootFS.Layers; len(got) != 1 || got[0] != want {
		t.Errorf("the image's layers are %v, want only %s (the program's archive)", got, want)
	}
}

// envEnsure makes TestEnsureProcess ensure the image under that
// repository.
const envEnsure = "RZ_KEEPER_TEST_ENSURE"

// TestEnsureProcess is the helper of TestConcurrentBuilds.
func TestEnsureProcess(t *testing.T) {
	repo := os.Getenv(envEnsure)
	if repo == "" {
		t.Skip("the ensuring process of TestConcurrentBuilds")
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := proctest.WaitGo(); err != nil {
		t.Fatal(err)
	}
	ref, built, err := ensure(context.Background(), cli, repo)
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("ref", ref)
	proctest.Say("built", strconv.FormatBool(built))
}

// Two processes that need the image at the same moment: one builds it,
// the other waits and finds it.
func TestConcurrentBuilds(t *testing.T) {
	r := newRig(t)
	repo := testRepo(t, r)
	var hs []*proctest.Helper
	for i := range 2 {
		h := proctest.StartHelper(t, proctest.Spec{
			Name: "ensurer " + strconv.Itoa(i),
			Argv: proctest.TestArgv("TestEnsureProcess", "-test.timeout=5m"),
			Env:  proctest.Environ(func(k string) bool { return k == envEnsure }, envEnsure+"="+repo),
		})
		h.Within = 5 * time.Minute
		h.Expect("waiting")
		hs = append(hs, h)
	}
	for _, h := range hs {
		h.Tell("go")
	}
	builds := 0
	refs := map[string]bool{}
	for _, h := range hs {
		refs[h.Expect("ref")] = true
		if h.Expect("built") == "true" {
			builds++
		}
		h.Finish()
	}
	if builds != 1 || len(refs) != 1 {
		t.Errorf("%d of the 2 processes built the image, giving %v; want one build, one image", builds, refs)
	}
}

// The program builds in a module of its own with nothing fetched: it may
// import the standard library only.
func TestProgramImportsStandardLibraryOnly(t *testing.T) {
	n := 0
	for name, src := range programFiles() {
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		n++
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
				t.Errorf("program/%s imports %s, which is not the standard library", name, p)
			}
		}
	}
	if n == 0 {
		t.Fatal("no program source embedded")
	}
}

// programConsts returns the string constants of the program's sources.
func programConsts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, src := range programFiles() {
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[id.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
			return true
		})
	}
	return out
}
