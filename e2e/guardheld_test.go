//go:build linux

package e2e_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/internal/usermod"
)

// A GuardAll binary builds two images with testcontainers-go's
// FromDockerfile (the first over the tag of an image that was there
// before) and creates two named volumes, each listed in its ledger before
// the engine makes it; then it is SIGKILLed. Its watchdog removes both
// volumes and the first image; the image that was there before keeps
// its id; the second image, which a container of another process uses,
// is kept, with that container, until the next sweep after the container
// went.
func TestGuardAllBuildAndVolume(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	bin := buildGuardFixture(t)
	cli := r.eng.Client()
	ctx := t.Context()
	tag := nonceHex(t)
	imgTag := "rz-guardfixture-" + tag + ":built"

	// The image that had the tag before the test.
	before := buildImage(t, cli, "FROM "+r.img+"\nLABEL dev.rightsize.test.before="+tag+"\n", imgTag)
	var leftIDs []string
	var holder string
	t.Cleanup(func() {
		ctx := context.Background() // t.Context() has ended by now
		if holder != "" {
			cli.ContainerRemove(ctx, holder, client.ContainerRemoveOptions{Force: true})
		}
		removeTagged(t, cli, tag)
		removeImages(cli, tag, append(leftIDs, before)...)
	})

	f := startGuardFixtureTest(t, bin, "TestBuildAndVolume", r.cache, r.img, tag, "guard", "block", "RZ_FIXTURE_IMAGE_TAG="+imgTag)
	run, images, volumes := f.get("run"), f.get("image"), f.get("volume")
	leftIDs = images
	t.Cleanup(func() {
		for _, v := range volumes {
			cli.VolumeRemove(context.Background(), v, client.VolumeRemoveOptions{Force: true})
		}
	})
	if len(run) != 1 || len(images) != 2 || len(volumes) != 2 {
		t.Fatalf("the fixture said run %q, images %q, volumes %q:\n%s", run, images, volumes, f.output())
	}
	if images[0] == before || images[1] == before {
		t.Fatalf("a build gave the image that was there before (%s): the test proves nothing", before)
	}
	rf, err := ledger.ReadRun(r.cache, run[0])
	if err != nil {
		t.Fatal(err)
	}
	l := rf.ReadLists()
	if len(l.Images) != 2 || !slices.Equal(l.Volumes, volumes) {
		t.Errorf("the run's ledger lists images %q and volumes %q; want 2 images and the volumes %q", l.Images, l.Volumes, volumes)
	}

	// Another process's container of the second image, made past the guard.
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Image: images[1], Config: &container.Config{Cmd: []string{"/server", "8080"}}})
	if err != nil {
		t.Fatal(err)
	}
	holder = c.ID

	if err := f.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exists := func(kind, ref string) bool { return engineHas(t, cli, kind, ref) }
	poll(t, goneWithin, "the killed binary's first image and volumes to be gone", func() (bool, string) {
		var left []string
		for _, v := range volumes {
			if exists("volume", v) {
				left = append(left, "volume "+v)
			}
		}
		if exists("image", images[0]) {
			left = append(left, "image "+short(images[0]))
		}
		for _, id := range f.get("container") {
			if exists("container", id) {
				left = append(left, "container "+short(id))
			}
		}
		return len(left) == 0, fmtList(left)
	})
	if !exists("image", before) {
		t.Errorf("the image that had the tag %s before the test (%s) is gone", imgTag, short(before))
	}
	if !exists("image", images[1]) {
		t.Errorf("the second image (%s), which another process's container uses, is gone", short(images[1]))
	}
	if !exists("container", holder) {
		t.Errorf("the other process's container %s of the run's image is gone", short(holder))
	}

	// Once that container went, the next sweep removes the image.
	if _, err := cli.ContainerRemove(ctx, holder, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	holder = ""
	// The watchdog may still be at work (it looks by label once more): a
	// sweep leaves the run to it until it is done.
	drv := mustOpenHost(t, r)
	// (Its last look may remove the image itself, once the container
	// went: the run's files, which it left for what it kept in its first
	// pass, then go with the next sweep.)
	poll(t, goneWithin, "a sweep to remove the run's second image and the run's files", func() (bool, string) {
		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(r.cache))
		if err != nil {
			return false, err.Error()
		}
		return !exists("image", images[1]) && !ledger.HasFiles(filepath.Join(r.cache, ledger.RunsDir), run[0]), fmt.Sprintf("%+v", rep.Runs)
	})
	if !exists("image", before) {
		t.Errorf("the sweep removed the image that was there before (%s)", short(before))
	}
	// The builds' intermediate images (the classic builder's) went with
	// them: every image of the builds carries the Dockerfile's label.
	if left := builtImages(t, cli, tag); len(left) > 0 {
		t.Errorf("images of the builds are left: %q", left)
	}
}

// removeImages removes ids and the images carrying the fixture's label
// tag, children before parents (a parent with children cannot go, forced
// or not): the test's cleanup.
func removeImages(cli *client.Client, tag string, ids ...string) {
	for _, id := range ids {
		cli.ImageRemove(context.Background(), id, client.ImageRemoveOptions{Force: true})
	}
	testimage.RemoveBuilt(context.Background(), cli, "dev.rightsize.test.guardall="+tag)
}

// engineHas reports whether the engine has the image, volume or
// container ref; any answer but "not there" fails t.
func engineHas(t *testing.T, cli *client.Client, kind, ref string) bool {
	t.Helper()
	ctx := context.Background()
	var err error
	switch kind {
	case "image":
		_, err = cli.ImageInspect(ctx, ref)
	case "volume":
		_, err = cli.VolumeInspect(ctx, ref, client.VolumeInspectOptions{})
	default:
		_, err = cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
	}
	// Podman 4.3 answers an inspect that races the image's removal with a
	// 500 that says "image not known" (gone), or, when the image's blobs
	// went before its record, "reading data blob size "manifest" for
	// "…": size is not known"; and one that races a container's removal
	// with a 500 that says "container <id> does not exist in database: no
	// such container". Those two removals are under way, not done:
	// counted as there, for a poll to ask again.
	if err != nil && (strings.Contains(err.Error(), "size is not known") || strings.Contains(err.Error(), "does not exist in database")) {
		return true
	}
	if err != nil && !harness.NotFound(err) && !strings.Contains(err.Error(), "image not known") {
		t.Fatal(err)
	}
	return err == nil
}

// builtImages lists the images, intermediate ones included, that carry
// the fixture's label with value tag.
func builtImages(t *testing.T, cli *client.Client, tag string) []string {
	t.Helper()
	var il client.ImageListResult
	var err error
	// Podman fails a listing that meets an image another removal is
	// taking away, any image of the engine's, another row's too
	// ("retrieving parent of image …: image not known", "… size is not
	// known"): asked again a few times, as the library does; a failure
	// after that is not known to be gone, and a poll asks again.
	for try := 1; try <= 5; try++ {
		il, err = cli.ImageList(context.Background(), client.ImageListOptions{All: true, Filters: client.Filters{}.Add("label", "dev.rightsize.test.guardall="+tag)})
		if err == nil {
			break
		}
		time.Sleep(time.Duration(try) * 200 * time.Millisecond)
	}
	if err != nil {
		return []string{"(the listing failed: " + err.Error() + ")"}
	}
	var out []string
	for _, im := range il.Items {
		out = append(out, im.ID)
	}
	return out
}

// buildImage builds an image of dockerfile, past any guard, tagged tag,
// and returns its id.
func buildImage(t *testing.T, cli *client.Client, dockerfile, tag string) string {
	t.Helper()
	id, err := testimage.BuildDockerfile(t.Context(), cli, dockerfile, tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func fmtList(l []string) string {
	var b bytes.Buffer
	for i, s := range l {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// A GuardAll binary that ends normally leaves none of its builds or
// named volumes, nor their ledger lines.
func TestGuardAllBuildAndVolumeEnded(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	bin := buildGuardFixture(t)
	cli := r.eng.Client()
	ctx := t.Context()
	tag := nonceHex(t)
	f := startGuardFixtureTest(t, bin, "TestBuildAndVolume", r.cache, r.img, tag, "guard", "block", "RZ_FIXTURE_IMAGE_TAG=rz-guardfixture-"+tag+":built")
	run, images, volumes := f.get("run"), f.get("image"), f.get("volume")
	t.Cleanup(func() {
		removeTagged(t, cli, tag)
		for _, v := range volumes {
			cli.VolumeRemove(context.Background(), v, client.VolumeRemoveOptions{Force: true})
		}
		removeImages(cli, tag, images...)
	})
	if len(run) != 1 || len(images) != 2 || len(volumes) != 2 {
		t.Fatalf("the fixture said run %q, images %q, volumes %q:\n%s", run, images, volumes, f.output())
	}
	f.stdin.Close()
	if err := <-f.done; err != nil {
		t.Fatalf("the fixture failed: %v\n%s", err, f.output())
	}
	for _, v := range volumes {
		if _, err := cli.VolumeInspect(ctx, v, client.VolumeInspectOptions{}); !harness.NotFound(err) {
			t.Errorf("volume %s after the binary ended: %v, want gone", v, err)
		}
	}
	if left := builtImages(t, cli, tag); len(left) > 0 {
		t.Errorf("images of the builds are left after the binary ended: %q", left)
	}
	if ledger.HasFiles(filepath.Join(r.cache, ledger.RunsDir), run[0]) {
		t.Errorf("the run's ledger files remain after the binary ended")
	}
}

// A GuardAll binary whose own -test.timeout alarm ends it (the test
// blocks past it) leaves none of its builds or named volumes: its
// watchdog removes them, and the run's ledger files with them.
func TestGuardAllBuildAndVolumeTimeout(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	bin := buildGuardFixture(t)
	cli := r.eng.Client()
	tag := nonceHex(t)
	// Long enough for the builds on a loaded machine; the test blocks
	// until the alarm ends it.
	f := startGuardFixtureTimeout(t, bin, "TestBuildAndVolume", "40s", r.cache, r.img, tag, "guard", "block", "RZ_FIXTURE_IMAGE_TAG=rz-guardfixture-"+tag+":built")
	run, images, volumes := f.get("run"), f.get("image"), f.get("volume")
	t.Cleanup(func() {
		removeTagged(t, cli, tag)
		for _, v := range volumes {
			cli.VolumeRemove(context.Background(), v, client.VolumeRemoveOptions{Force: true})
		}
		removeImages(cli, tag, images...)
	})
	if len(run) != 1 || len(images) != 2 || len(volumes) != 2 {
		t.Fatalf("the fixture said run %q, images %q, volumes %q:\n%s", run, images, volumes, f.output())
	}
	var err error
	select {
	case err = <-f.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the fixture's -test.timeout alarm did not end it:\n%s", f.output())
	}
	<-f.read // its last lines, the alarm's among them
	if err == nil || !strings.Contains(f.output(), "test timed out after 40s") {
		t.Fatalf("the fixture ended (%v) but not by its -test.timeout alarm:\n%s", err, f.output())
	}
	ctx := t.Context()
	poll(t, goneWithin, "the timed-out binary's images, volumes and ledger files to be gone", func() (bool, string) {
		var left []string
		for _, v := range volumes {
			if _, err := cli.VolumeInspect(ctx, v, client.VolumeInspectOptions{}); !harness.NotFound(err) {
				left = append(left, fmt.Sprintf("volume %s (%v)", v, err))
			}
		}
		for _, im := range images {
			if _, err := cli.ImageInspect(ctx, im); !harness.NotFound(err) && (err == nil || !strings.Contains(err.Error(), "image not known")) {
				left = append(left, fmt.Sprintf("image %s (%v)", short(im), err))
			}
		}
		left = append(left, builtImages(t, cli, tag)...)
		if ledger.HasFiles(filepath.Join(r.cache, ledger.RunsDir), run[0]) {
			left = append(left, "the run's ledger files")
		}
		return len(left) == 0, fmtList(left)
	})
	// The watchdog was told their names before the creates: it removed
	// them in its first pass, not in its last look by the run's label
	// (its fate says which).
	fates, err := ledger.ReadFates(r.cache)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range fates {
		for _, it := range f.Items {
			if f.Run != run[0] || (it.Kind != "volume" && it.Kind != "image") {
				continue
			}
			seen++
			if !it.Outcome.Gone() || it.Note == reaper.NoteNotListed {
				t.Errorf("the watchdog's fate says of %s %s: %s (%s); want removed as told, in its first pass", it.Kind, cmp.Or(it.ID, it.Name), it.Outcome, it.Note)
			}
		}
	}
	if seen != 4 {
		t.Errorf("the run's fates name %d volumes and images, want 4 (2 of each): %+v", seen, fates)
	}
}

// The user's path for what GuardAll guards beyond sandboxtest: the user's
// module's guarded package (sandboxtest.Main with GuardAll in its own
// TestMain; plain testcontainers-go and the Docker client in its test,
// built with `go test -c` in a module of its own) builds an image, makes
// a container of it and a named volume, and is SIGKILLed. Its watchdog
// removes all three, and the run's ledger files with them.
func TestUserModuleGuardAllBuildAndVolume(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	bin := usermod.Build(t, usermod.Guarded)
	cli := r.eng.Client()
	tag := nonceHex(t)
	t.Cleanup(func() {
		removeTagged(t, cli, tag)
		cli.VolumeRemove(context.Background(), "userdata-"+tag, client.VolumeRemoveOptions{Force: true})
		removeImages(cli, tag)
	})
	info := filepath.Join(t.TempDir(), "info")
	proc, err := proctest.Start(proctest.Spec{
		Name: "user's guarded test",
		Argv: []string{bin, "-test.run=^TestBuildsAndVolumes$", "-test.count=1", "-test.timeout=20m"},
		Env: r.userEnv(
			usermod.EnvImage+"="+r.img, usermod.EnvInfo+"="+info, usermod.EnvTag+"="+tag,
			// testcontainers-go's build needs a home, and this one has no
			// settings of the machine's in it.
			"HOME="+t.TempDir(),
			// GuardAll's proxy socket is in TMPDIR, whose path has a limit.
			"TMPDIR="+shortDir(t)),
		Dir: filepath.Dir(bin),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The rig's owner cleanup: the process, a watchdog still at work and
	// whatever carries the run's label (once the run is known) go with
	// the test.
	o := &owner{Proc: proc, name: "user's guarded test", r: r, eng: r.eng}
	t.Cleanup(o.cleanup)
	done := make(chan struct{})
	go func() { proc.Wait(readyWithin + exitWithin); close(done) }()
	in, err := usermod.WaitBlocked(info, done, readyWithin)
	if err != nil {
		t.Fatalf("%v\n%s", err, proc.Output())
	}
	if len(in.Containers) != 1 || len(in.Images) != 1 || len(in.Volumes) != 1 {
		t.Fatalf("the user's test said containers %q, images %q, volumes %q; want one of each\n%s", in.Containers, in.Images, in.Volumes, proc.Output())
	}
	ctx := t.Context()
	run, err := r.eng.Label(ctx, in.Containers[0], backend.LabelRunID)
	if err != nil || run == "" {
		t.Fatalf("the run of the user's container %s: %q, %v", short(in.Containers[0]), run, err)
	}
	o.run, o.watchdog = run, ledger.LiveWatchdog(r.cache, run)
	rf, err := ledger.ReadRun(r.cache, run)
	if err != nil {
		t.Fatal(err)
	}
	l := rf.ReadLists()
	if len(l.Images) != 1 || !slices.Equal(l.Volumes, in.Volumes) {
		t.Errorf("the run's ledger lists images %q and volumes %q; want the build and %q", l.Images, l.Volumes, in.Volumes)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	if !proc.Wait(exitWithin) {
		t.Fatal("the user's test did not die of SIGKILL")
	}
	killed := time.Now()
	exists := func(kind, ref string) bool { return engineHas(t, cli, kind, ref) }
	took := poll(t, goneWithin, "the killed user's container, build and volume, and its run's files, to be gone", func() (bool, string) {
		var left []string
		for _, x := range [][2]string{{"container", in.Containers[0]}, {"image", in.Images[0]}, {"volume", in.Volumes[0]}} {
			if exists(x[0], x[1]) {
				left = append(left, x[0]+" "+short(x[1]))
			}
		}
		if ledger.HasFiles(filepath.Join(r.cache, ledger.RunsDir), run) {
			left = append(left, "the run's ledger files")
		}
		return len(left) == 0, fmtList(left)
	})
	if left := builtImages(t, cli, tag); len(left) > 0 {
		t.Errorf("images of the build are left: %q", left)
	}
	t.Logf("SIGKILL of the user's GuardAll binary → its container, build and volume gone in %s (%s after the kill)", ms(took), ms(time.Since(killed)))
}
