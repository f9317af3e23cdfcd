//go:build linux

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// thenTC is the bench's own owner mode: containers started with raw
// testcontainers-go (Ryuk on), not through rightsize.
const thenTC = "tc"

// labelBench marks the containers the bench starts itself (the floor's,
// the testcontainers-go owner's).
const labelBench = "dev.rightsize.bench"

type bench struct {
	eng *harness.Engine
	img string
	cmd []string
}

func nonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// destroyWatch collects the engine's destroy events of the containers
// carrying a label, from a moment before it was made.
type destroyWatch struct {
	at     chan time.Time
	errs   <-chan error
	cancel context.CancelFunc
}

func (b *bench) watchDestroy(ctx context.Context, label string) *destroyWatch {
	ctx, cancel := context.WithCancel(ctx)
	since := time.Now().Add(-time.Second)
	res := b.eng.Client().Events(ctx, client.EventsListOptions{
		Since:   fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()),
		Filters: client.Filters{}.Add("type", "container").Add("event", "destroy").Add("label", label),
	})
	w := &destroyWatch{at: make(chan time.Time, 1024), errs: res.Err, cancel: cancel}
	go func() {
		for m := range res.Messages {
			w.at <- time.Unix(0, m.TimeNano)
		}
	}()
	return w
}

// last waits for n destroy events and returns the latest's time.
func (w *destroyWatch) last(n int, timeout time.Duration) (time.Time, error) {
	defer w.cancel()
	var last time.Time
	deadline := time.After(timeout)
	for got := 0; got < n; got++ {
		select {
		case t := <-w.at:
			if t.After(last) {
				last = t
			}
		case err := <-w.errs:
			return last, fmt.Errorf("engine events: %v (after %d of %d destroys)", err, got, n)
		case <-deadline:
			return last, fmt.Errorf("%d of %d containers destroyed after %s", got, n, timeout)
		}
	}
	return last, nil
}

// dockerCLI is the docker command line the watchdog will use: the first
// on PATH, as the owner finds it.
func dockerCLI() (string, error) {
	p, err := exec.LookPath("docker")
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

// crashRun is one paired measurement.
type crashRun struct {
	rightsize, floorCLI, floorEvents time.Duration
	// With -breakdown: kill to the watchdog's docker command starting, and
	// from there to the last destroy; the floor's CLI start to its last
	// destroy is floorEvents.
	react, tail time.Duration
}

func (b *bench) crash(ctx context.Context, ns []int, runs int) error {
	cache, err := os.MkdirTemp("", "rz-bench-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	docker, err := dockerCLI()
	if err != nil {
		return fmt.Errorf("the docker command line (the watchdog's and the floor's): %w", err)
	}
	var env []string
	var trace string
	if *breakdown {
		if env, trace, err = wrapDocker(docker); err != nil {
			return err
		}
		defer os.RemoveAll(filepath.Dir(trace))
	}
	for _, n := range ns {
		var rs []crashRun
		for i := range runs {
			var cr crashRun
			steps := []func() error{
				func() (err error) {
					cr.rightsize, cr.react, cr.tail, err = b.rightsizeOnce(ctx, cache, n, env, trace)
					return err
				},
				func() (err error) { cr.floorCLI, cr.floorEvents, err = b.floorOnce(ctx, docker, n); return err },
			}
			if i%2 == 1 {
				slices.Reverse(steps) // neither side always goes first
			}
			for _, s := range steps {
				if err := s(); err != nil {
					return fmt.Errorf("crash-to-clean n=%d run %d: %w", n, i, err)
				}
			}
			logf("n=%d run %d: rightsize %s, floor %s (events %s)", n, i, cr.rightsize, cr.floorCLI, cr.floorEvents)
			rs = append(rs, cr)
		}
		pick := func(f func(crashRun) time.Duration) []time.Duration {
			var out []time.Duration
			for _, r := range rs {
				out = append(out, f(r))
			}
			return out
		}
		rz, fl, fe := pick(func(r crashRun) time.Duration { return r.rightsize }), pick(func(r crashRun) time.Duration { return r.floorCLI }), pick(func(r crashRun) time.Duration { return r.floorEvents })
		var ratios []float64
		for _, r := range rs {
			ratios = append(ratios, float64(r.rightsize)/float64(r.floorCLI))
		}
		slices.Sort(ratios)
		verdict := "met"
		ratio := float64(harness.Median(rz)) / float64(harness.Median(fl))
		if ratio > 1.2 {
			verdict = "MISSED"
		}
		fmt.Printf("crash-to-clean n=%d runs=%d rightsize median=%s p95=%s | floor (docker rm -f, CLI start to exit) median=%s p95=%s | ratio of medians=%.2f (target <= 1.20: %s), median of paired ratios=%.2f | floor CLI start to last destroy median=%s\n",
			n, len(rs), ms(harness.Median(rz)), ms(harness.P95(rz)), ms(harness.Median(fl)), ms(harness.P95(fl)), ratio, verdict, ratios[len(ratios)/2], ms(harness.Median(fe)))
		if *breakdown {
			re, ta := pick(func(r crashRun) time.Duration { return r.react }), pick(func(r crashRun) time.Duration { return r.tail })
			fmt.Printf("crash-to-clean/breakdown n=%d kill to the watchdog's docker starting median=%s p95=%s | from there to the last destroy median=%s p95=%s | the floor's CLI start to its last destroy median=%s (with -breakdown a wrapper script adds ~2 ms to the rightsize side)\n",
				n, ms(harness.Median(re)), ms(harness.P95(re)), ms(harness.Median(ta)), ms(harness.P95(ta)), ms(harness.Median(fe)))
		}
	}
	return nil
}

// rightsizeOnce starts an owner with n containers, SIGKILLs it and returns
// the time from just before the kill to the last container's destroy
// event; with trace, also when the watchdog's docker command started.
func (b *bench) rightsizeOnce(ctx context.Context, cache string, n int, env []string, trace string) (total, react, tail time.Duration, err error) {
	p := harness.Plan{Image: b.img, Cmd: b.cmd, Containers: n}
	proc, err := proctest.Start(proctest.Spec{Name: "owner", Argv: []string{os.Args[0]}, Env: harness.OwnerEnv(os.Environ(), cache, p, env...)})
	if err != nil {
		return 0, 0, 0, err
	}
	defer proc.EnsureDead()
	run, err := proc.Get("run", 3*time.Minute)
	if err != nil {
		return 0, 0, 0, err
	}
	if _, err := proc.Get("ready", 3*time.Minute); err != nil {
		return 0, 0, 0, err
	}
	if trace != "" {
		_ = os.Truncate(trace, 0)
	}
	w := b.watchDestroy(ctx, harness.LabelRunID+"="+run)
	t0 := time.Now()
	if err := proc.Kill(); err != nil {
		return 0, 0, 0, err
	}
	last, err := w.last(n, *timeoutFor)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("run %s: %w", run, err)
	}
	proc.Wait(time.Minute)
	// The watchdog ends by deleting the run's files: wait for that, so
	// that it does not overlap the next measurement.
	deadline := time.Now().Add(*timeoutFor)
	for len(harness.RunFiles(cache, run)) > 0 {
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("run %s: ledger files still there after %s", run, *timeoutFor)
		}
		time.Sleep(10 * time.Millisecond)
	}
	total = last.Sub(t0)
	if trace != "" {
		start, err := firstTrace(trace, "rm")
		if err != nil {
			return 0, 0, 0, err
		}
		react, tail = start.Sub(t0), last.Sub(start)
	}
	return total, react, tail, nil
}

// floorOnce starts n containers directly and removes them with one
// `docker rm -f`, timed from the CLI's start to its exit; it also returns
// the time from the CLI's start to the last destroy event.
func (b *bench) floorOnce(ctx context.Context, docker string, n int) (cli, events time.Duration, err error) {
	id := nonce()
	labels := map[string]string{labelBench: id}
	var names []string
	for i := range n {
		name := fmt.Sprintf("rz-floor-%s-%d", id, i+1)
		if _, err := b.eng.RunContainer(ctx, b.img, name, b.cmd, labels, false); err != nil {
			_ = b.eng.Remove(ctx, names...)
			return 0, 0, err
		}
		names = append(names, name)
	}
	w := b.watchDestroy(ctx, labelBench+"="+id)
	cmd := exec.Command(docker, append([]string{"rm", "-f"}, names...)...)
	// The environment the watchdog gives its docker command.
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+b.eng.Host, "DOCKER_CONTEXT=")
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	cli = time.Since(t0)
	if err != nil {
		_ = b.eng.Remove(ctx, names...)
		return 0, 0, fmt.Errorf("docker rm -f: %v: %s", err, out)
	}
	last, err := w.last(n, *timeoutFor)
	if err != nil {
		return 0, 0, err
	}
	return cli, last.Sub(t0), nil
}

// wrapDocker makes a folder with a `docker` that timestamps its start in a
// trace file and runs the real one, and returns the owner environment that
// puts it first on PATH.
func wrapDocker(docker string) (env []string, trace string, err error) {
	dir, err := os.MkdirTemp("", "rz-bench-wrap-")
	if err != nil {
		return nil, "", err
	}
	trace = filepath.Join(dir, "trace")
	script := "#!/bin/sh\nprintf '%s %s\\n' \"$(date +%s%N)\" \"$*\" >>\"$RZ_BENCH_TRACE\"\nexec " + docker + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		return nil, "", err
	}
	return []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "RZ_BENCH_TRACE=" + trace}, trace, nil
}

// firstTrace is the time of the first traced docker call whose first
// argument is verb.
func firstTrace(trace, verb string) (time.Time, error) {
	f, err := os.Open(trace)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[1] == verb {
			ns, err := strconv.ParseInt(fs[0], 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(0, ns), nil
		}
	}
	return time.Time{}, fmt.Errorf("no `docker %s` in %s", verb, trace)
}

// ryuk measures testcontainers-go with Ryuk, when its image is here.
func (b *bench) ryuk(ctx context.Context, ns []int, runs int) error {
	const tcDefault = "testcontainers/ryuk:0.14.0"
	ok, err := b.eng.ImageExists(ctx, *ryukImage)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Printf("crash-to-clean/testcontainers-ryuk: skipped: %s is not on the engine at %s, and it cannot be pulled here; `docker load` it and run again to measure\n", *ryukImage, b.eng.Host)
		return nil
	}
	if *ryukImage != tcDefault {
		fmt.Printf("crash-to-clean/testcontainers-ryuk: skipped: testcontainers-go v0.45.0 runs %s (its name is fixed, registry prefix aside); tag %s as that to measure it\n", tcDefault, *ryukImage)
		return nil
	}
	cache, err := os.MkdirTemp("", "rz-bench-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	for _, n := range ns {
		var ds []time.Duration
		for i := range runs {
			d, err := b.tcOnce(ctx, cache, n)
			if err != nil {
				return fmt.Errorf("testcontainers-go + Ryuk n=%d run %d: %w", n, i, err)
			}
			logf("ryuk n=%d run %d: %s", n, i, d)
			ds = append(ds, d)
		}
		fmt.Printf("crash-to-clean/testcontainers-ryuk n=%d runs=%d median=%s p95=%s\n", n, len(ds), ms(harness.Median(ds)), ms(harness.P95(ds)))
	}
	return nil
}

func (b *bench) tcOnce(ctx context.Context, cache string, n int) (time.Duration, error) {
	id := nonce()
	p := harness.Plan{Image: b.img, Cmd: b.cmd, Containers: n, Then: thenTC}
	env := harness.OwnerEnv(os.Environ(), cache, p, "RZ_BENCH_ID="+id)
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TESTCONTAINERS_RYUK_DISABLED=") })
	env = append(env, "TESTCONTAINERS_RYUK_DISABLED=false")
	proc, err := proctest.Start(proctest.Spec{Name: "testcontainers-go owner", Argv: []string{os.Args[0]}, Env: env})
	if err != nil {
		return 0, err
	}
	defer proc.EnsureDead()
	if _, err := proc.Get("ready", 3*time.Minute); err != nil {
		return 0, err
	}
	w := b.watchDestroy(ctx, labelBench+"="+id)
	t0 := time.Now()
	if err := proc.Kill(); err != nil {
		return 0, err
	}
	last, err := w.last(n, *timeoutFor)
	if err != nil {
		return 0, err
	}
	return last.Sub(t0), nil
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

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64) + "ms"
}
