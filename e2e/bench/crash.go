//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// labelBench marks the containers the bench starts itself (the floor's,
// the testcontainers-go owner's).
const labelBench = "dev.rightsize.bench"

// The sides of a crash-to-clean run: rightsize with either watchdog, and
// the floor.
const (
	sideScript = "script"
	sideNative = "native"
	sideFloor  = "floor"
	// tracedSuffix makes a side a watchdog's again, its owner pointed at
	// a tracing proxy (traceProxy): these runs say when its removal call
	// starts, and are kept out of the crash-to-clean figures.
	tracedSuffix = "-traced"
)

// traced reports whether side is a traced one, and its watchdog's kind.
func traced(side string) (string, bool) { return strings.CutSuffix(side, tracedSuffix) }

type bench struct {
	eng  *harness.Engine
	img  string
	cmd  []string
	proc *procWatch // nil when the process connector is out of reach
	// trace is the native watchdog's tracing proxy; nil when not wanted
	// or not possible.
	trace *traceProxy
	// floorMedian is the floor's median per container count, once the
	// crash figure has measured it (the Ryuk figure quotes it).
	floorMedian map[int]time.Duration
}

func nonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// engineWatch collects the engine's kill and destroy events of the
// containers carrying a label, from a moment before it was made. Every
// side of every figure ends on it: the last destroy event of the n
// containers, stamped by the engine once the container is out of its
// list.
type engineWatch struct {
	cli    *client.Client
	ctx    context.Context
	cancel context.CancelFunc
	label  string
	since  time.Time
	events chan engineEvent
	errs   <-chan error
}

type engineEvent struct {
	action string
	id     string // the container's
	at     time.Time
}

func (b *bench) watch(ctx context.Context, label string) *engineWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &engineWatch{cli: b.eng.Client(), ctx: ctx, cancel: cancel, label: label, since: time.Now().Add(-time.Second)}
	w.subscribe()
	return w
}

// subscribe (again) asks for the events from the watch's start: a stream
// the engine ended (Podman's, under 20 removals at once, once ended with
// EOF) is taken up again, its events given twice, which wait counts once.
func (w *engineWatch) subscribe() {
	res := w.cli.Events(w.ctx, client.EventsListOptions{
		Since: fmt.Sprintf("%d.%09d", w.since.Unix(), w.since.Nanosecond()),
		Filters: client.Filters{}.Add("type", "container").Add("event", "kill").Add("event", "destroy").
			Add("event", "remove"). // Podman's destroy
			Add("label", w.label),
	})
	events := make(chan engineEvent, 4096)
	w.events, w.errs = events, res.Err
	go func() {
		// The client never closes Messages: the watch's end stops this.
		for {
			select {
			case m, ok := <-res.Messages:
				if !ok {
					return
				}
				select {
				case events <- engineEvent{action: string(m.Action), id: m.Actor.ID, at: time.Unix(0, m.TimeNano)}:
				case <-w.ctx.Done():
					return
				}
			case <-w.ctx.Done():
				return
			}
		}
	}()
}

// wait waits for n containers' destroy events; it returns the first kill
// event's time (zero if none: the containers were not running) and the
// last destroy event's.
func (w *engineWatch) wait(n int, timeout time.Duration) (firstKill, lastDestroy time.Time, err error) {
	defer w.cancel()
	deadline := time.After(timeout)
	destroyed := map[string]bool{}
	for resubscribed := 0; len(destroyed) < n; {
		select {
		case ev := <-w.events:
			switch ev.action {
			case "kill":
				if firstKill.IsZero() || ev.at.Before(firstKill) {
					firstKill = ev.at
				}
			case "destroy", "remove":
				destroyed[ev.id] = true
				if ev.at.After(lastDestroy) {
					lastDestroy = ev.at
				}
			}
		case err := <-w.errs:
			if resubscribed < 3 && w.ctx.Err() == nil {
				resubscribed++
				fmt.Fprintf(os.Stderr, "engine events ended (%v) after %d of %d destroys: asking again from the start\n", err, len(destroyed), n)
				w.subscribe()
				continue
			}
			return firstKill, lastDestroy, fmt.Errorf("engine events: %v (after %d of %d destroys)", err, len(destroyed), n)
		case <-deadline:
			return firstKill, lastDestroy, fmt.Errorf("%d of %d containers destroyed after %s", len(destroyed), n, timeout)
		}
	}
	return firstKill, lastDestroy, nil
}

// checkGone confirms the end point: nothing labelled so is in the
// engine's list of containers.
func (b *bench) checkGone(ctx context.Context, label string) error {
	res, err := b.eng.Client().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", label)})
	if err != nil {
		return err
	}
	if len(res.Items) > 0 {
		return fmt.Errorf("every destroy event came, yet the engine still lists %d containers labelled %s", len(res.Items), label)
	}
	return nil
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

// sample is one side of one run. Durations are from t0: the instant
// just before the owner's SIGKILL, or before the floor's `docker rm -f`
// is started; a negative one is unknown.
type sample struct {
	total time.Duration // to the last destroy event
	// engineKill: to the engine's first kill event (the engine has
	// taken the first removal call and signalled the container).
	engineKill time.Duration
	// dockerExec: to the exec of the docker command line that removes
	// (the floor's).
	dockerExec time.Duration
	// ownerGone: to the owner's last thread gone (the watchdog's stdin is
	// at end-of-file by then); selfExec: to the script watchdog's exec of
	// the test binary, which then reaps.
	ownerGone, selfExec time.Duration
	// Through the tracing proxy: to the first request after the kill,
	// and to the first DELETE; firstLine is the first request's line.
	request, delete time.Duration
	firstLine       string
	lost            bool // process events were lost
}

const unknown = time.Duration(-1)

// newSample is a sample with every step unknown.
func newSample() sample {
	return sample{engineKill: unknown, dockerExec: unknown, ownerGone: unknown, selfExec: unknown, request: unknown, delete: unknown}
}

func (b *bench) crash(ctx context.Context, ns []int, runs int, kinds []string) error {
	cache, err := os.MkdirTemp("", "rz-bench-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	docker, err := dockerCLI()
	if err != nil {
		return fmt.Errorf("the docker command line (the script watchdog's and the floor's): %w", err)
	}
	sides := append(slices.Clone(kinds), sideFloor)
	if b.trace, err = startTraceProxy(b.eng.Host); err != nil {
		fmt.Printf("eof-to-removal: no tracing proxy (%v): only the engine's view\n", err)
	} else {
		defer b.trace.Close()
		for _, k := range kinds {
			sides = append(sides, k+tracedSuffix)
		}
	}
	for _, n := range ns {
		got := map[string][]sample{}
		var loads []float64
		for i := range runs {
			loads = append(loads, load1())
			order := append(slices.Clone(sides[i%len(sides):]), sides[:i%len(sides)]...) // no side always goes first
			for _, s := range order {
				var sm sample
				var err error
				if s == sideFloor {
					sm, err = b.floorOnce(ctx, docker, n)
				} else {
					sm, err = b.rightsizeOnce(ctx, cache, s, n)
				}
				if err != nil {
					return fmt.Errorf("crash-to-clean n=%d run %d, %s: %w", n, i, s, err)
				}
				got[s] = append(got[s], sm)
			}
			var parts []string
			for _, s := range sides {
				parts = append(parts, s+" "+ms(got[s][i].total))
			}
			logf("n=%d run %d: %s", n, i, strings.Join(parts, ", "))
		}
		b.report(n, sides, got, loads)
	}
	return nil
}

// report prints the figures of one container count.
func (b *bench) report(n int, sides []string, got map[string][]sample, loads []float64) {
	fl := got[sideFloor]
	flTotal := pick(fl, func(s sample) time.Duration { return s.total })
	if b.floorMedian == nil {
		b.floorMedian = map[int]time.Duration{}
	}
	b.floorMedian[n] = harness.Median(flTotal)
	target := 1.05
	if n == 1 {
		target = 1.10
	}
	fmt.Printf("crash-to-clean n=%d runs=%d load(1m)=%.2f-%.2f | floor: docker rm -f NAME..., its start to the last destroy median=%s p95=%s\n",
		n, len(fl), slices.Min(loads), slices.Max(loads), ms(harness.Median(flTotal)), ms(harness.P95(flTotal)))
	for _, s := range sides {
		if _, tr := traced(s); s == sideFloor || tr {
			continue
		}
		rz := got[s]
		total := pick(rz, func(s sample) time.Duration { return s.total })
		var ratios []float64
		for i := range rz {
			ratios = append(ratios, float64(rz[i].total)/float64(fl[i].total))
		}
		ratio := float64(harness.Median(total)) / float64(harness.Median(flTotal))
		fmt.Printf("crash-to-clean n=%d watchdog=%s: SIGKILL to the last destroy median=%s p95=%s | ratio of medians=%.2f (target <= %.2f: %s) | median of paired ratios=%.2f\n",
			n, s, ms(harness.Median(total)), ms(harness.P95(total)), ratio, target, verdict(ratio <= target), harness.Median(ratios))
	}
	// Where the time goes, from the kernel's process events and the
	// engine's kill events.
	for _, s := range sides {
		sm := got[s]
		kill := known(pick(sm, func(s sample) time.Duration { return s.engineKill }))
		dx := known(pick(sm, func(s sample) time.Duration { return s.dockerExec }))
		totalOf := func(s sample) time.Duration { return s.total }
		tail := between(sm, func(s sample) time.Duration { return s.dockerExec }, totalOf)
		kind, tr := traced(s)
		switch {
		case s == sideScript:
			gone := known(pick(sm, func(s sample) time.Duration { return s.ownerGone }))
			self := known(pick(sm, func(s sample) time.Duration { return s.selfExec }))
			fmt.Printf("eof-to-removal n=%d watchdog=script runs=%d, the engine's view: SIGKILL to the engine's first kill event median=%s p95=%s | owner gone median=%s | the script's exec of the test binary median=%s p95=%s%s\n",
				n, len(kill), ms1(harness.Median(kill)), ms1(harness.P95(kill)), ms1(harness.Median(gone)), ms1(harness.Median(self)), ms1(harness.P95(self)), lostNote(sm))
		case s == sideNative:
			gone := known(pick(sm, func(s sample) time.Duration { return s.ownerGone }))
			fmt.Printf("eof-to-removal n=%d watchdog=native runs=%d, the engine's view: SIGKILL to the engine's first kill event median=%s p95=%s (the call's start, plus the request and the engine's signal to the container; the call's start itself is in the traced line) | owner gone median=%s%s\n",
				n, len(kill), ms1(harness.Median(kill)), ms1(harness.P95(kill)), ms1(harness.Median(gone)), lostNote(sm))
		case tr:
			del := known(pick(sm, func(s sample) time.Duration { return s.delete }))
			req := known(pick(sm, func(s sample) time.Duration { return s.request }))
			fromGone := between(sm, func(s sample) time.Duration { return s.ownerGone }, func(s sample) time.Duration { return s.delete })
			lines := map[string]int{}
			for _, x := range sm {
				lines[x.firstLine]++
			}
			total := pick(sm, func(s sample) time.Duration { return s.total })
			delTail := between(sm, func(s sample) time.Duration { return s.delete }, totalOf)
			fmt.Printf("eof-to-removal n=%d watchdog=%s runs=%d (through a tracing proxy, runs apart from the crash-to-clean figures): SIGKILL to its first DELETE request median=%s p95=%s (target <= 15ms: %s) | from the owner's last thread gone median=%s p95=%s | SIGKILL to its first request median=%s (first requests: %s) | first DELETE to the last destroy median=%s | SIGKILL to the last destroy through the proxy median=%s%s\n",
				n, kind, len(del), ms1(harness.Median(del)), ms1(harness.P95(del)), verdict(len(del) > 0 && harness.Median(del) <= 15*time.Millisecond),
				ms1(harness.Median(fromGone)), ms1(harness.P95(fromGone)), ms1(harness.Median(req)), firstLines(lines),
				ms(harness.Median(delTail)), ms(harness.Median(total)), lostNote(sm))
		case s == sideFloor:
			fmt.Printf("eof-to-removal n=%d floor runs=%d: start of docker rm -f to its exec median=%s | to the engine's first kill event median=%s | docker exec to the last destroy median=%s%s\n",
				n, len(sm), ms1(harness.Median(dx)), ms1(harness.Median(kill)), ms(harness.Median(tail)), lostNote(sm))
		}
	}
}

// rightsizeOnce starts an owner with n containers and the watchdog of
// side, SIGKILLs it, and measures to the last destroy.
func (b *bench) rightsizeOnce(ctx context.Context, cache, side string, n int) (sm sample, err error) {
	sm = newSample()
	p := harness.Plan{Image: b.img, Cmd: b.cmd, Containers: n}
	kind, tr := traced(side)
	var extra []string
	if tr {
		extra = []string{"DOCKER_HOST=" + b.trace.Host, "DOCKER_CONTEXT="}
	}
	env := harness.OwnerEnv(os.Environ(), cache, p, append(extra, "RIGHTSIZE_WATCHDOG="+kind)...)
	proc, err := proctest.Start(proctest.Spec{Name: "owner", Argv: []string{os.Args[0]}, Env: env})
	if err != nil {
		return sm, err
	}
	defer proc.EnsureDead()
	run, err := proc.Get("run", 3*time.Minute)
	if err != nil {
		return sm, ownerErr(proc, err)
	}
	defer func() {
		// A failed run leaves nothing behind: what the owner made is
		// removed by its run's label, once the owner is dead.
		if err != nil {
			proc.EnsureDead()
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			removed, rerr := b.eng.RemoveRun(cctx, run)
			if rerr != nil || len(removed) > 0 {
				fmt.Fprintf(os.Stderr, "run %s failed; removed what it left: %q (%v)\n", run, removed, rerr)
			}
		}
	}()
	if _, err := proc.Get("ready", 3*time.Minute); err != nil {
		return sm, ownerErr(proc, err)
	}
	wdKind, _ := proc.Value("watchdog.kind")
	if wdKind != kind {
		return sm, fmt.Errorf("asked the owner for a %s watchdog (RIGHTSIZE_WATCHDOG), it started %q", kind, wdKind)
	}
	wdPID, _ := proc.Value("watchdog")
	wd, _ := strconv.Atoi(wdPID)
	label := harness.LabelRunID + "=" + run
	w := b.watch(ctx, label)
	if tr {
		b.trace.arm()
	}
	b.proc.arm()
	t0 := time.Now()
	if err := proc.Kill(); err != nil {
		return sm, err
	}
	firstKill, last, err := w.wait(n, *timeoutFor)
	evs, lost := b.proc.collect()
	if tr {
		first, line, del := b.trace.collect()
		if !first.IsZero() {
			sm.request, sm.firstLine = first.Sub(t0), line
		}
		if !del.IsZero() {
			sm.delete = del.Sub(t0)
		}
	}
	if err != nil {
		return sm, fmt.Errorf("run %s: %w", run, err)
	}
	if err := b.checkGone(ctx, label); err != nil {
		return sm, fmt.Errorf("run %s: %w", run, err)
	}
	proc.Wait(time.Minute)
	// The watchdog ends by deleting the run's files, after its second
	// pass: wait for that, so that it does not overlap the next
	// measurement.
	deadline := time.Now().Add(*timeoutFor)
	for len(harness.RunFiles(cache, run)) > 0 {
		if time.Now().After(deadline) {
			return sm, fmt.Errorf("run %s: ledger files still there after %s", run, *timeoutFor)
		}
		time.Sleep(10 * time.Millisecond)
	}
	sm.total = last.Sub(t0)
	if !firstKill.IsZero() {
		sm.engineKill = firstKill.Sub(t0)
	}
	sm.lost = lost
	if b.proc == nil || lost {
		return sm, nil
	}
	if at, ok := lastExit(evs, proc.Pid()); ok {
		sm.ownerGone = at.Sub(t0)
	}
	if kind == sideScript && wd > 0 {
		if x, ok := execOf(evs, wd); ok {
			sm.selfExec = x.at.Sub(t0)
		}
	}
	return sm, nil
}

// floorOnce starts n containers directly and removes them with one
// `docker rm -f`, measured from just before the command starts to the
// last destroy event.
func (b *bench) floorOnce(ctx context.Context, docker string, n int) (sample, error) {
	sm := newSample()
	id := nonce()
	labels := map[string]string{labelBench: id}
	var names []string
	for i := range n {
		name := fmt.Sprintf("rz-floor-%s-%d", id, i+1)
		if _, err := b.eng.RunContainer(ctx, b.img, name, b.cmd, labels, false); err != nil {
			_ = b.eng.Remove(ctx, names...)
			return sm, err
		}
		names = append(names, name)
	}
	label := labelBench + "=" + id
	w := b.watch(ctx, label)
	cmd := exec.Command(docker, append([]string{"rm", "-f"}, names...)...)
	// The environment the watchdog gives its docker command.
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+b.eng.Host, "DOCKER_CONTEXT=")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	b.proc.arm()
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.proc.collect()
		_ = b.eng.Remove(ctx, names...)
		return sm, err
	}
	if err := cmd.Wait(); err != nil {
		b.proc.collect()
		_ = b.eng.Remove(ctx, names...)
		return sm, fmt.Errorf("docker rm -f: %v: %s", err, out.String())
	}
	firstKill, last, err := w.wait(n, *timeoutFor)
	evs, lost := b.proc.collect()
	if err != nil {
		_ = b.eng.Remove(ctx, names...)
		return sm, err
	}
	if err := b.checkGone(ctx, label); err != nil {
		return sm, err
	}
	sm.total = last.Sub(t0)
	if !firstKill.IsZero() {
		sm.engineKill = firstKill.Sub(t0)
	}
	sm.lost = lost
	if x, ok := execOf(evs, cmd.Process.Pid); ok && !lost {
		sm.dockerExec = x.at.Sub(t0)
	}
	return sm, nil
}

// ownerErr adds what the owner wrote on stderr to err.
func ownerErr(p *proctest.Proc, err error) error {
	tail := strings.TrimSpace(p.Stderr())
	if len(tail) > 2000 {
		tail = "..." + tail[len(tail)-2000:]
	}
	if tail == "" {
		return fmt.Errorf("%w (%s, nothing on stderr)", err, p.Status())
	}
	return fmt.Errorf("%w (%s); its stderr ends:\n%s", err, p.Status(), tail)
}

func pick(ss []sample, f func(sample) time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(ss))
	for _, s := range ss {
		out = append(out, f(s))
	}
	return out
}

// between is to - from of each sample where both are known.
func between(ss []sample, from, to func(sample) time.Duration) []time.Duration {
	var out []time.Duration
	for _, s := range ss {
		if a, b := from(s), to(s); a >= 0 && b >= 0 {
			out = append(out, b-a)
		}
	}
	return out
}

// known drops the unknown values.
func known(ds []time.Duration) []time.Duration {
	return slices.DeleteFunc(slices.Clone(ds), func(d time.Duration) bool { return d < 0 })
}

func lostNote(ss []sample) string {
	lost := 0
	for _, s := range ss {
		if s.lost {
			lost++
		}
	}
	if lost == 0 {
		return ""
	}
	return fmt.Sprintf(" | process events missing in %d of %d runs (not root, or the socket overflowed): those runs are left out of the steps", lost, len(ss))
}

var engineID = regexp.MustCompile(`[0-9a-f]{12,}`)

// firstLines says which first requests (or programs) were seen, how
// often; a request's path is cut at its query, an engine id made "ID".
func firstLines(lines map[string]int) string {
	// Lines that differ only by an id or a query count as one.
	same := map[string]int{}
	for l, c := range lines {
		if l == "" {
			l = "none"
		}
		l, _, _ = strings.Cut(l, "?")
		same[engineID.ReplaceAllString(strings.TrimSuffix(l, " HTTP/1.1"), "ID")] += c
	}
	var parts []string
	for l, c := range same {
		parts = append(parts, fmt.Sprintf("%q x%d", l, c))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}
