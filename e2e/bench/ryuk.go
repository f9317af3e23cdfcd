//go:build linux

package main

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/internal/image"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// thenTC is the bench's own owner mode: containers started with raw
// testcontainers-go (Ryuk on), not through rightsize.
const thenTC = "tc"

const (
	// ryukImage is the reaper image testcontainers-go v0.45.0 runs; its
	// name is fixed, TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX aside.
	ryukImage = "testcontainers/ryuk:0.14.0"
	// standinPrefix is the hub prefix under which the bench puts its
	// stand-in: testcontainers-go then runs
	// rightsize-bench/ryuk-standin/testcontainers/ryuk:0.14.0, an image
	// of the bench's own, and the real name is never touched.
	standinPrefix = "rightsize-bench/ryuk-standin"
	// labelStandin carries a hash of what the stand-in image was built
	// from, so that a changed stand-in is rebuilt.
	labelStandin = "dev.rightsize.bench.ryuk-standin"
	// The labels testcontainers-go v0.45.0 puts on its reaper container.
	labelTCSession = "org.testcontainers.sessionId"
	labelTCReaper  = "org.testcontainers.reaper"
)

// standinSource is the stand-in's program, built on the spot.
//
//go:embed ryukstandin/main.go
var standinSource []byte

// ryuk measures testcontainers-go with its reaper: SIGKILL of an owner
// that started n containers with testcontainers.GenericContainer, Ryuk
// on, to the last of them destroyed, with the same watch as the other
// sides. The reaper is the real Ryuk image when the engine has it (mode
// auto or real), else the bench's stand-in (auto or standin).
func (b *bench) ryuk(ctx context.Context, ns []int, runs int, mode string) error {
	prefix, what, undo, err := b.reaperSetup(ctx, mode)
	if err != nil {
		return err
	}
	defer undo()
	cache, err := os.MkdirTemp("", "rz-bench-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	for _, n := range ns {
		var ds []time.Duration
		var loads []float64
		for i := range runs {
			loads = append(loads, load1())
			d, err := b.tcOnce(ctx, cache, n, prefix)
			if err != nil {
				return fmt.Errorf("testcontainers-go + %s n=%d run %d: %w", what, n, i, err)
			}
			logf("ryuk n=%d run %d: %s", n, i, d)
			ds = append(ds, d)
		}
		floor := ""
		if f, ok := b.floorMedian[n]; ok && f > 0 {
			floor = fmt.Sprintf(" | %.1fx the floor's median of the crash figure above (not paired)", float64(harness.Median(ds))/float64(f))
		}
		fmt.Printf("crash-to-clean/testcontainers-ryuk n=%d runs=%d reaper=%s load(1m)=%.2f-%.2f: SIGKILL to the last destroy median=%s p95=%s%s\n",
			n, len(ds), what, slices.Min(loads), slices.Max(loads), ms(harness.Median(ds)), ms(harness.P95(ds)), floor)
	}
	return nil
}

// reaperSetup finds the reaper image (reaperImage) and, behind a hub
// prefix, gives the containers' image that name too: the prefix applies to
// every image of the owner. undo untags it (the engine keeps the original
// name).
func (b *bench) reaperSetup(ctx context.Context, mode string) (prefix, what string, undo func(), err error) {
	prefix, what, err = b.reaperImage(ctx, mode)
	if err != nil || prefix == "" {
		return prefix, what, func() {}, err
	}
	alias := path.Join(prefix, b.img)
	if _, err := b.eng.Client().ImageTag(ctx, client.ImageTagOptions{Source: b.img, Target: alias}); err != nil {
		return "", "", nil, fmt.Errorf("tag %s as %s: %w", b.img, alias, err)
	}
	return prefix, what, func() {
		if _, err := b.eng.Client().ImageRemove(context.Background(), alias, client.ImageRemoveOptions{}); err != nil {
			fmt.Fprintf(os.Stderr, "bench: untag %s: %v\n", alias, err)
		}
	}, nil
}

// reaperImage finds the reaper image to run: the hub prefix to give
// testcontainers-go ("" for none) and what to call it in the output.
func (b *bench) reaperImage(ctx context.Context, mode string) (prefix, what string, err error) {
	userPrefix := os.Getenv("TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX")
	real := path.Join(userPrefix, ryukImage)
	switch mode {
	case "auto", "real":
		ok, err := b.eng.ImageExists(ctx, real)
		if err != nil {
			return "", "", err
		}
		if ok {
			return userPrefix, "ryuk(" + real + ")", nil
		}
		if mode == "real" {
			return "", "", fmt.Errorf("%s is not on the engine at %s, and it cannot be pulled here: `docker load` it, or run with -ryuk standin", real, b.eng.Host)
		}
	case "standin":
	default:
		return "", "", fmt.Errorf("-ryuk %q: want auto, real or standin", mode)
	}
	ref, err := b.ensureStandin(ctx)
	if err != nil {
		return "", "", fmt.Errorf("the Ryuk stand-in: %w", err)
	}
	return standinPrefix, "standin(" + ref + ", not Ryuk)", nil
}

// ensureStandin builds the stand-in image FROM scratch (a static Go
// binary alone) unless the engine has it, built from this very source.
func (b *bench) ensureStandin(ctx context.Context) (string, error) {
	ref := path.Join(standinPrefix, ryukImage)
	sum := sha256.Sum256(append([]byte(runtime.Version()+"\n"), standinSource...))
	hash := hex.EncodeToString(sum[:])[:12]
	cli := b.eng.Client()
	res, err := cli.ImageInspect(ctx, ref)
	switch {
	case err == nil && res.Config != nil && res.Config.Labels[labelStandin] == hash:
		return ref, nil
	case err == nil:
		// An older stand-in: replace it rather than leave it dangling.
		if _, err := cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{}); err != nil {
			return "", fmt.Errorf("remove the older %s: %w", ref, err)
		}
	case !harness.NotFound(err):
		return "", err
	}
	arch, err := image.EngineArch(ctx, cli)
	if err != nil {
		return "", err
	}
	bin, err := buildStandin(ctx, arch)
	if err != nil {
		return "", err
	}
	rootfs, err := image.Tarball([]image.Entry{
		{Name: "ryuk-standin", Mode: 0o755, Content: bin},
		{Name: "tmp", Mode: 0o1777, Dir: true},
	})
	if err != nil {
		return "", err
	}
	changes := []string{
		`CMD ["/ryuk-standin"]`,
		"LABEL " + labelStandin + "=" + hash,
		`LABEL org.opencontainers.image.description="a stand-in for testcontainers' Ryuk, not Ryuk: rightsize-go e2e/bench/ryukstandin"`,
	}
	if err := image.Import(ctx, cli, ref, rootfs, changes, "rightsize-go e2e/bench: a stand-in for Ryuk, not Ryuk"); err != nil {
		return "", err
	}
	return ref, nil
}

// buildStandin builds the stand-in, a module of its own with no
// dependency, for linux/arch, static.
func buildStandin(ctx context.Context, arch string) ([]byte, error) {
	return image.BuildModule(ctx, map[string][]byte{
		"main.go": standinSource,
		"go.mod":  []byte("module ryukstandin\n\ngo 1.22\n"),
	}, arch)
}

// tcOnce is one run: an owner with a testcontainers session of its own
// (so that it never meets an earlier owner's reaper, which may be about to
// exit), killed; then the wait for its reaper to remove itself.
func (b *bench) tcOnce(ctx context.Context, cache string, n int, prefix string) (time.Duration, error) {
	id := nonce()
	session := "rzbench" + nonce()
	p := harness.Plan{Image: b.img, Cmd: b.cmd, Containers: n, Then: thenTC}
	env := tcEnv(harness.OwnerEnv(os.Environ(), cache, p, "RZ_BENCH_ID="+id), session, prefix, b.eng.Host)
	proc, err := proctest.Start(proctest.Spec{Name: "testcontainers-go owner", Argv: []string{os.Args[0]}, Env: env})
	if err != nil {
		return 0, err
	}
	defer proc.EnsureDead()
	defer b.awaitReaper(session)
	if _, err := proc.Get("ready", 3*time.Minute); err != nil {
		return 0, ownerErr(proc, err)
	}
	label := labelBench + "=" + id
	w := b.watch(ctx, label)
	t0 := time.Now()
	if err := proc.Kill(); err != nil {
		return 0, err
	}
	_, last, err := w.wait(n, *timeoutFor)
	if err != nil {
		return 0, err
	}
	if err := b.checkGone(ctx, label); err != nil {
		return 0, err
	}
	return last.Sub(t0), nil
}

// tcEnv is the testcontainers-go owner's environment: Ryuk on, with its
// default timings; a session of its own; the hub prefix that names the
// reaper's image, if any; and the host override, which the owner needs to
// reach the reaper's published port (kept when set; localhost for an
// engine on a local socket, whose ports are published on this host).
func tcEnv(base []string, session, prefix, engineHost string) []string {
	env := envlist.Without(base, func(k string) bool {
		return strings.HasPrefix(k, "TESTCONTAINERS_RYUK_") || strings.HasPrefix(k, "RYUK_") ||
			k == "TESTCONTAINERS_SESSION_ID" || k == "TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX"
	})
	set := []string{"TESTCONTAINERS_RYUK_DISABLED=false", "TESTCONTAINERS_SESSION_ID=" + session}
	if prefix != "" {
		set = append(set, "TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX="+prefix)
	}
	if v, ok := os.LookupEnv("TESTCONTAINERS_HOST_OVERRIDE"); ok {
		set = append(set, "TESTCONTAINERS_HOST_OVERRIDE="+v)
	} else if u, err := url.Parse(engineHost); err == nil && u.Scheme == "unix" {
		set = append(set, "TESTCONTAINERS_HOST_OVERRIDE=localhost")
	}
	return envlist.Merge(env, set...)
}

// awaitReaper waits for the reaper of session to remove itself (it is
// started with auto-remove and exits once it has pruned), so that the next
// run does not overlap it; one still there after a minute is removed and
// said.
func (b *bench) awaitReaper(session string) {
	ctx := context.Background()
	f := client.Filters{}.Add("label", labelTCSession+"="+session).Add("label", labelTCReaper+"=true")
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := b.eng.Client().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err == nil && len(res.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var ids []string
			if err == nil {
				for _, c := range res.Items {
					ids = append(ids, c.ID)
				}
			}
			fmt.Fprintf(os.Stderr, "bench: the reaper of session %s is still there after a minute (%v); removing it\n", session, errors.Join(err, b.eng.Remove(ctx, ids...)))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tcOwner starts p.Containers containers with testcontainers-go alone,
// Ryuk on, labelled with RZ_BENCH_ID, says ready and waits to be killed.
func tcOwner(t *testing.T, p harness.Plan) {
	labels := map[string]string{labelBench: os.Getenv("RZ_BENCH_ID")}
	for range p.Containers {
		_, err := testcontainers.GenericContainer(t.Context(), testcontainers.GenericContainerRequest{
			ContainerRequest: testcontainers.ContainerRequest{Image: p.Image, Cmd: p.Cmd, Labels: labels},
			Started:          true,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	proctest.Say("ready", "1")
	select {}
}
