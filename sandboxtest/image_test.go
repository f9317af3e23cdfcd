package sandboxtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// imagesMarked lists the images, intermediate ones too, that carry the
// mark of image line name.
func (r *rig) imagesMarked(name string) []string {
	r.t.Helper()
	il, err := r.cli.ImageList(context.Background(), client.ImageListOptions{All: true, Filters: client.Filters{}.Add("label", backend.LabelImage+"="+name)})
	if err != nil {
		r.t.Fatal(err)
	}
	var ids []string
	for _, im := range il.Items {
		ids = append(ids, im.ID)
	}
	return ids
}

// NewImage builds a folder's Dockerfile, with its build arguments and
// less what its .dockerignore names, into an image in the run's ledger
// before the build, marked as the run's and never with the run's own
// label; a sandbox runs from it; its removal is refused while the sandbox
// runs; the test's end takes the image, its intermediate images and its
// line. A build that fails fails the test with the build's own words, and
// leaves nothing.
func TestNewImage(t *testing.T) {
	base := testimage.Busybox(t)
	r := newRig(t)
	in, lines, listed := sessionLines(t, ledger.ImageKind)
	dir := t.TempDir()
	for f, content := range map[string]string{
		"Dockerfile":    "FROM " + base + "\nARG WORD\nCOPY . /ctx/\nRUN echo \"$WORD\" > /word\n",
		"hello":         "hello from the context\n",
		"secret":        "never sent to the engine\n",
		".dockerignore": "secret\nDockerfile\n.dockerignore\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var name string
	var chain []string
	t.Run("built", func(t *testing.T) {
		img := sandboxtest.NewImage(t, sandboxtest.Build{Dir: dir, Args: map[string]string{"WORD": "argued"}})
		name = img.Name()
		t.Cleanup(func() {
			// A failure's leftover. This runs before the image's own
			// removal (cleanups run last in, first out): only after a
			// failure, or it would do the removal the test checks.
			if t.Failed() {
				testimage.RemoveBuilt(context.Background(), r.cli, backend.LabelImage+"="+name)
			}
		})
		if !strings.HasPrefix(name, names.ImagePrefix) {
			t.Errorf("image %q: want the prefix %s", name, names.ImagePrefix)
		}
		ii, err := r.cli.ImageInspect(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		l := ii.Config.Labels
		if l[backend.LabelImageRun] != in.RunID || l[backend.LabelImage] != name || l[backend.LabelImageSince] == "" || l[docker.LabelRunID] != "" {
			t.Errorf("image %s is labelled %v; want run %s's image marks, and not the run's own label", name, l, in.RunID)
		}
		if !listed(name) {
			t.Errorf("image %s is not in the run's ledger (%s)", name, lines)
		}
		chain = r.builtChain(name, base)
		// Docker's classic builder makes an image of each step; Podman's
		// commits fewer (two here).
		if len(chain) < 2 {
			t.Errorf("image %s: its build's own images %q; want at least two, the image and a step below it", name, chain)
		}
		g := sandboxtest.Start(t, sandboxtest.Spec{Image: name, Cmd: []string{"sleep", "300"}})
		res, err := g.Exec(t.Context(), []string{"sh", "-c", "cat /word /ctx/hello; ls /ctx"})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "argued\nhello from the context\n") || strings.Contains(res.Stdout, "secret") {
			t.Errorf("the sandbox of the image reads %s; want the build argument, the context's file, and no file .dockerignore names", res)
		}
		if err := img.Remove(t.Context()); err == nil {
			t.Errorf("the image was removed while sandbox %s runs from it", g.Name())
		} else if len(r.imagesMarked(name)) == 0 || !listed(name) {
			t.Errorf("a refused removal (%v) took the image or its ledger line", err)
		}
	})
	if left := r.imagesMarked(name); len(left) > 0 {
		t.Errorf("the test that built image %s ended, and %d image(s) of its build are still on the engine: %v", name, len(left), left)
	}
	for _, id := range chain {
		if _, err := r.cli.ImageInspect(t.Context(), id); !cerrdefs.IsNotFound(err) {
			t.Errorf("the test that built image %s ended, and the image %s of one of its steps is still on the engine (%v)", name, id, err)
		}
	}
	if _, err := r.cli.ImageInspect(t.Context(), base); err != nil {
		t.Errorf("the image the build was FROM, %s, went with it: %v", base, err)
	}
	if listed(name) {
		t.Errorf("image %s is gone, and still in the run's ledger", name)
	}

	t.Run("a failed build", func(t *testing.T) {
		bad := t.TempDir()
		nonce := fmt.Sprintf("step-%d-%d", os.Getpid(), time.Now().UnixNano())
		if err := os.WriteFile(filepath.Join(bad, "Dockerfile"), []byte("FROM "+base+"\nRUN echo "+nonce+" > /a\nRUN echo the build fails here && exit 3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := r.imageIDs()
		tb := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			sandboxtest.NewImage(tb, sandboxtest.Build{Dir: bad})
		}()
		<-done
		if !strings.Contains(tb.msg, "the build fails here") || !strings.Contains(tb.msg, "sandboxtest: image") {
			t.Errorf("NewImage of a failing build failed the test with %q; want the build's own words", tb.msg)
		}
		// What the build's first step made: new, and made by its RUN.
		for id := range r.imageIDs() {
			if before[id] {
				continue
			}
			h, err := r.cli.ImageHistory(t.Context(), id)
			if err == nil && len(h.Items) > 0 && strings.Contains(h.Items[0].CreatedBy, nonce) {
				t.Errorf("the failed build left the image %s of its first step", id)
				_, _ = r.cli.ImageRemove(context.Background(), id, client.ImageRemoveOptions{})
			}
		}
	})
}

// imageIDs is the engine's images, intermediate ones too, by id.
func (r *rig) imageIDs() map[string]bool {
	r.t.Helper()
	il, err := r.cli.ImageList(context.Background(), client.ImageListOptions{All: true})
	if err != nil {
		r.t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, im := range il.Items {
		ids[im.ID] = true
	}
	return ids
}

// builtChain is the ids of image name and of the images below it, down to
// (not including) the image base it was built FROM.
func (r *rig) builtChain(name, base string) []string {
	r.t.Helper()
	ctx := context.Background()
	bi, err := r.cli.ImageInspect(ctx, base)
	if err != nil {
		r.t.Fatal(err)
	}
	h, err := r.cli.ImageHistory(ctx, name)
	if err != nil {
		r.t.Fatal(err)
	}
	var ids []string
	// Podman gives the history's ids without "sha256:", and refuses a
	// bare 64-hex id as a name: each is kept as "sha256:<hex>".
	// The walk also ends at the first image below the top that has a
	// name: a step of the build has none, and the base may be another
	// image than the inspect above found, where the engine holds two of
	// that short name (Podman: localhost/rightsize-test/busybox:x beside
	// a docker.io/rightsize-test/busybox:x, whose build resolves FROM to
	// the second). Podman's history gives no names: each is inspected.
	baseID := strings.TrimPrefix(bi.ID, "sha256:")
	named := func(id string) bool {
		ii, err := r.cli.ImageInspect(ctx, "sha256:"+id)
		return err == nil && len(ii.RepoTags) > 0
	}
	for i, it := range h.Items {
		id := strings.TrimPrefix(it.ID, "sha256:")
		if id == "" || id == "<missing>" {
			continue
		}
		if id == baseID || (i > 0 && named(id)) {
			break
		}
		ids = append(ids, "sha256:"+id)
	}
	return ids
}
