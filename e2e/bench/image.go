//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// The image figure: an image a GuardAll test binary built through the
// proxy, the binary SIGKILLed, to the image's delete event; against the
// floor, `docker rmi -f ID` of the same build made directly, from just
// before the command starts to the same event. The owner is the e2e
// guard fixture's TestBuildOne (e2e/guardfixture), built once with
// `go test -c`.

// imageLabel marks the bench's builds, for the cleanup of a failed run.
const imageLabel = "dev.rightsize.test.guardall"

func (b *bench) image(ctx context.Context, runs int, kinds []string) error {
	dir, err := os.MkdirTemp("", "rz-bench-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fixture := filepath.Join(dir, "guardfixture.test")
	if out, err := exec.Command("go", "test", "-c", "-o", fixture, "./e2e/guardfixture").CombinedOutput(); err != nil {
		return fmt.Errorf("go test -c ./e2e/guardfixture (run the bench from the module's root): %v\n%s", err, out)
	}
	docker, err := dockerCLI()
	if err != nil {
		return fmt.Errorf("the docker command line (the floor's): %w", err)
	}
	cache := filepath.Join(dir, "cache")
	sides := append(slices.Clone(kinds), sideFloor)
	got := map[string][]time.Duration{}
	var loads []float64
	for i := range runs {
		loads = append(loads, load1())
		order := append(slices.Clone(sides[i%len(sides):]), sides[:i%len(sides)]...)
		for _, s := range order {
			var d time.Duration
			var err error
			if s == sideFloor {
				d, err = b.imageFloorOnce(ctx, docker)
			} else {
				d, err = b.imageOnce(ctx, fixture, cache, dir, s)
			}
			if err != nil {
				return fmt.Errorf("image run %d, %s: %w", i, s, err)
			}
			got[s] = append(got[s], d)
		}
		logf("image run %d: %v", i, got)
	}
	fl := got[sideFloor]
	fmt.Printf("image runs=%d load(1m)=%.2f-%.2f | floor: docker rmi -f ID, its start to the image's delete event median=%s p95=%s\n",
		len(fl), slices.Min(loads), slices.Max(loads), ms(harness.Median(fl)), ms(harness.P95(fl)))
	for _, s := range kinds {
		rz := got[s]
		var ratios []float64
		for i := range rz {
			ratios = append(ratios, float64(rz[i])/float64(fl[i]))
		}
		ratio := float64(harness.Median(rz)) / float64(harness.Median(fl))
		fmt.Printf("image watchdog=%s: SIGKILL of a GuardAll binary that built it to the image's delete event median=%s p95=%s | ratio of medians=%.2f (target <= 1.10: %s) | median of paired ratios=%.2f\n",
			s, ms(harness.Median(rz)), ms(harness.P95(rz)), ratio, verdict(ratio <= 1.10), harness.Median(ratios))
	}
	return nil
}

// imageOnce starts the fixture under GuardAll with the watchdog kind,
// waits for its build, SIGKILLs it and waits for the image's delete
// event and the run's ledger files to go.
func (b *bench) imageOnce(ctx context.Context, fixture, cache, dir, kind string) (d time.Duration, err error) {
	tag := nonce()
	cmd := exec.Command(fixture, "-test.v", "-test.run=^TestBuildOne$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(),
		"RZ_GUARDALL_FIXTURE=guard", "RZ_FIXTURE_IMAGE="+b.img, "RZ_FIXTURE_TAG="+tag,
		"RZ_FIXTURE_IMAGE_TAG=rz-bench-image-"+tag+":built",
		"RIGHTSIZE_CACHE_DIR="+cache, "RIGHTSIZE_WATCHDOG="+kind, "TMPDIR="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	said := map[string]string{}
	var mu sync.Mutex
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if kv, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "fixture: "); ok {
				k, v, _ := strings.Cut(kv, "=")
				mu.Lock()
				said[k] = v
				mu.Unlock()
				if k == "ready" {
					close(ready)
				}
			}
		}
		io.Copy(io.Discard, out)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if err != nil {
			cmd.Process.Kill()
			b.removeBuilds(tag)
		}
	}()
	select {
	case <-ready:
	case err := <-exited:
		return 0, fmt.Errorf("the fixture ended before its build (%v): %s", err, stderr.String())
	case <-time.After(3 * time.Minute):
		return 0, fmt.Errorf("the fixture's build took over 3 minutes: %s", stderr.String())
	}
	mu.Lock()
	run, id := said["run"], said["image"]
	mu.Unlock()
	w := b.watchImage(ctx, id)
	t0 := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		return 0, err
	}
	<-exited
	at, err := w.wait(*timeoutFor)
	if err != nil {
		return 0, fmt.Errorf("run %s: image %s: %w", run, id, err)
	}
	if ok, err := b.eng.ImageExists(ctx, id); ok || err != nil {
		return 0, fmt.Errorf("run %s: the image's delete event came, yet it is there (%v)", run, err)
	}
	// The watchdog ends by deleting the run's files: wait for that, so
	// that it does not overlap the next measurement.
	deadline := time.Now().Add(*timeoutFor)
	for len(harness.RunFiles(cache, run)) > 0 {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("run %s: ledger files still there after %s", run, *timeoutFor)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return at.Sub(t0), nil
}

// imageFloorOnce builds the same image directly and removes it with one
// `docker rmi -f`.
func (b *bench) imageFloorOnce(ctx context.Context, docker string) (time.Duration, error) {
	tag := nonce()
	id, err := testimage.BuildDockerfile(ctx, b.eng.Client(), "FROM "+b.img+"\nLABEL "+imageLabel+"="+tag+"\n", "rz-bench-image-"+tag+":built", nil)
	if err != nil {
		return 0, err
	}
	w := b.watchImage(ctx, id)
	cmd := exec.Command(docker, "rmi", "-f", id)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+b.eng.Host, "DOCKER_CONTEXT=")
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.removeBuilds(tag)
		return 0, fmt.Errorf("docker rmi -f: %v: %s", err, out)
	}
	at, err := w.wait(*timeoutFor)
	if err != nil {
		b.removeBuilds(tag)
		return 0, err
	}
	return at.Sub(t0), nil
}

// imageWatch waits for one image's delete event, subscribed before the
// removal.
type imageWatch struct {
	cancel context.CancelFunc
	res    client.EventsResult
	id     string
}

func (b *bench) watchImage(ctx context.Context, id string) *imageWatch {
	ctx, cancel := context.WithCancel(ctx)
	since := time.Now().Add(-time.Second)
	res := b.eng.Client().Events(ctx, client.EventsListOptions{
		Since: fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()),
		Filters: client.Filters{}.Add("type", "image").Add("event", "delete").
			Add("event", "remove"), // Podman's
	})
	return &imageWatch{cancel: cancel, res: res, id: id}
}

func (w *imageWatch) wait(timeout time.Duration) (time.Time, error) {
	defer w.cancel()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-w.res.Messages:
			if m.Actor.ID == w.id || "sha256:"+m.Actor.ID == w.id {
				return time.Unix(0, m.TimeNano), nil
			}
		case err := <-w.res.Err:
			return time.Time{}, fmt.Errorf("engine events: %w", err)
		case <-deadline:
			return time.Time{}, fmt.Errorf("no delete event of image %s within %s", w.id, timeout)
		}
	}
}

// removeBuilds removes what a failed run built, by the fixture's label.
func (b *bench) removeBuilds(tag string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testimage.RemoveBuilt(ctx, b.eng.Client(), imageLabel+"="+tag)
}
