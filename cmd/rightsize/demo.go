package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/internal/termtext"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

const (
	// envRyukDisabled is testcontainers-go's switch for Ryuk, whose image
	// cannot be pulled without a registry; rightsize does not need it.
	envRyukDisabled = "TESTCONTAINERS_RYUK_DISABLED"
	// readyTimeout bounds a test process's start-up (two containers and a
	// network on a slow engine).
	readyTimeout = 60 * time.Second
	// goneTimeout bounds the wait for the watchdog or the sweep.
	goneTimeout = 30 * time.Second
	// leftoverPause is how long the demo shows that, without a watchdog,
	// nothing reacts to the kill.
	leftoverPause = time.Second
	// pollEvery is how often the engine is asked whether something is gone.
	pollEvery = 10 * time.Millisecond
)

// demo is one run of `rightsize demo`.
type demo struct {
	c     *cli
	id    string // the demo's id: value of demoLabel on its containers
	exe   string
	drv   *docker.Driver
	api   *client.Client
	ref   string
	cache string
	start time.Time

	interrupted atomic.Bool
	// cancel stops the steps; outputGone: stdout was closed under the demo
	// (`rightsize demo | head`), which then stops and cleans up.
	cancel     context.CancelFunc
	outputGone atomic.Bool
	// killedEarly: a test process was killed before it said it was ready
	// (interrupted or failed): the engine may still be creating what it
	// asked for, so the clean-up looks twice.
	killedEarly bool
	owners      []*ownerProc
}

func (c *cli) demo(args []string) error {
	fs := newFlags("demo")
	if stop, err := c.parse("demo", fs, args, 0); stop {
		return err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: cannot find this program to run it as the test process: %w", err)
	}
	d := &demo{c: c, id: hex.EncodeToString(b[:]), exe: exe, start: time.Now()}
	return d.main()
}

func (d *demo) main() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.cancel = cancel
	// A closed stdout must not kill the demo before it has cleaned up (Go's
	// default for a broken pipe on stdout): printf notices instead.
	signal.Ignore(syscall.SIGPIPE)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			d.interrupted.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		if d.drv != nil {
			d.drv.Close()
		}
	}()

	err := d.steps(ctx)
	removed, cerr := d.cleanup()
	left, verr := d.verify()
	switch {
	case d.outputGone.Load():
		return fmt.Errorf("demo: its output was closed; stopped, %s", firstNonEmpty(removed, "nothing to clean up"))
	case d.interrupted.Load():
		msg := "demo interrupted: " + firstNonEmpty(removed, "nothing was started yet")
		if cerr != nil {
			msg += "; cleaning up: " + cerr.Error()
		}
		if verr != nil || left != "" {
			msg += "; but " + firstNonEmpty(left, fmt.Sprint(verr))
		} else {
			msg += "; nothing is left"
		}
		return &exitError{code: exitInterrupted, msg: msg}
	case err != nil:
		if left != "" {
			return fmt.Errorf("demo: %v; and %s", err, left)
		}
		if removed != "" {
			return fmt.Errorf("demo: %v (cleaned up: %s)", err, removed)
		}
		return fmt.Errorf("demo: %w", err)
	case cerr != nil:
		return fmt.Errorf("demo: cleaning up: %w", cerr)
	case verr != nil:
		return fmt.Errorf("demo: checking that nothing is left: %w", verr)
	case left != "":
		return fmt.Errorf("demo: %s", left)
	}
	d.printf("\n%s the engine lists no container or network labelled %s=%s, and the demo's cache dir is removed (%s in all).\n",
		d.c.paint(sgrGreen, "Everything is gone:"), demoLabel, d.id, seconds(time.Since(d.start)))
	return nil
}

func (d *demo) steps(ctx context.Context) error {
	d.printf("%s\n\n", d.c.paint(sgrBold, "rightsize demo: whatever kills a test process, its sandboxes go away"))

	octx, cancel := context.WithTimeout(ctx, backend.ResolveTimeout)
	drv, err := docker.Open(octx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("no Docker engine answers (%v); run `make engine` (as root on Debian it installs and starts dockerd), or point DOCKER_HOST at one", err)
	}
	d.drv, d.api = drv, drv.Client()

	t := time.Now()
	ref, built, err := demoImage(ctx, d.api)
	if err != nil {
		return err
	}
	d.ref = ref
	how := "already on the engine"
	if built {
		how = "imported in " + ms(time.Since(t))
	}
	earlier, err := d.sweepEarlier(ctx)
	if err != nil {
		return fmt.Errorf("sweeping what earlier demos left: %w", err)
	}
	if err := d.makeCacheDir(); err != nil {
		return err
	}
	tw := d.table("  ")
	fmt.Fprintf(tw, "engine\t%s\n", termtext.Quote(drv.Endpoint()))
	fmt.Fprintf(tw, "image\t%s (FROM scratch: a static busybox; %s)\n", ref, how)
	fmt.Fprintf(tw, "ledger\t%s (a cache dir of its own, removed at the end)\n", termtext.Quote(d.cache))
	fmt.Fprintf(tw, "label\t%s=%s (on the containers the demo starts)\n", demoLabel, d.id)
	if earlier != "" {
		fmt.Fprintf(tw, "before\t%s\n", earlier)
	}
	tw.Flush()

	// Part one: the watchdog.
	d.step(1, "A test process starts two guarded containers and a network (watchdog on)")
	p, err := d.startOwner(ctx, reaper.On)
	if err != nil {
		return err
	}
	if err := d.list(ctx, p.runID); err != nil {
		return err
	}
	d.step(2, fmt.Sprintf("SIGKILL the test process (pid %d): none of its own cleanup can run", p.pid()))
	killed := d.kill(p)
	d.step(3, "Its watchdog sees its pipe close, and removes everything")
	lastCtr, lastNet, err := d.waitGone(ctx, p.runID, killed)
	if err != nil {
		return err
	}
	d.printf("   last container gone %s after the kill, the network %s after\n", d.c.paint(sgrGreen, ms(lastCtr)), ms(lastNet))
	if err := d.list(ctx, p.runID); err != nil {
		return err
	}
	if err := d.waitWatchdog(ctx, p); err != nil {
		return err
	}
	if _, err := ledger.ReadRun(d.cache, p.runID); errors.Is(err, fs.ErrNotExist) {
		d.printf("   and its ledger files are deleted\n")
	} else {
		d.printf("   (its ledger files are still there: %s)\n", oneLine(fmt.Sprint(err)))
	}
	d.tellFate(p.runID)

	// Part two: no watchdog, the next process's sweep.
	d.step(4, "Again with the watchdog off (RIGHTSIZE_REAPER=sweep in the test process's environment)")
	p, err = d.startOwner(ctx, reaper.SweepOnly)
	if err != nil {
		return err
	}
	if err := d.list(ctx, p.runID); err != nil {
		return err
	}
	// Killed before it is announced: a demo that dies at this line (a
	// test kills it there) leaves these leftovers to the next demo's
	// sweep, rather than racing the test process's own removal, which
	// its stdin's end of file would start.
	d.kill(p)
	d.step(5, fmt.Sprintf("SIGKILL it (pid %d): this time nothing is watching", p.pid()))
	if err := sleep(ctx, leftoverPause); err != nil {
		return err
	}
	d.printf("   %s later the leftovers are still there:\n", seconds(leftoverPause))
	if err := d.list(ctx, p.runID); err != nil {
		return err
	}
	if rf, err := ledger.ReadRun(d.cache, p.runID); err == nil {
		r := describeRun(rf, time.Now())
		d.printf("   the ledger lists run %s: owner %s (%s), %d %s, %d %s\n", termtext.Quote(r.ID),
			d.c.paint(statusColour(r.Status), r.Status), oneLine(r.Reason),
			len(r.Sandboxes), plural(len(r.Sandboxes), "sandbox", "sandboxes"), len(r.Networks), plural(len(r.Networks), "network", "networks"))
	}
	d.step(6, "The next process's sweep removes them (every test process sweeps at its first sandbox)")
	t = time.Now()
	rep, err := reaper.Sweep(ctx, d.drv, reaper.WithCacheDir(d.cache))
	took := time.Since(t)
	if rep != nil {
		var b bytes.Buffer
		rep.WriteTo(&b)
		d.printf("%s", indent(termtext.CleanText(b.String()), "   "))
	}
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if !rep.Clean() {
		return fmt.Errorf("the sweep kept %s back", keptSummary(rep))
	}
	if _, _, err := d.waitGone(ctx, p.runID, t); err != nil {
		return err
	}
	d.printf("   leftovers removed by the sweep in %s\n", d.c.paint(sgrGreen, ms(took)))
	d.tellFate(p.runID)
	return d.list(ctx, p.runID)
}

// tellFate prints the fate of run, as the next test process would tell it
// (and marks it told, so that none does again).
func (d *demo) tellFate(run string) {
	fates, err := ledger.ReadFates(d.cache)
	if err != nil {
		return
	}
	for _, f := range fates {
		if f.Run == run {
			ledger.ClaimTell(f.Path)
			d.printf("   what the next test process tells on stderr (rightsize ls --fates lists them all):\n     %s\n", reaper.FateLine(f))
			return
		}
	}
}

// ownerProc is a running test process of the demo.
type ownerProc struct {
	cmd      *exec.Cmd
	stdin    *os.File // the write end: closing it tells the process the demo is gone
	lines    chan string
	stderr   lockedBuffer
	done     chan struct{}
	waitErr  error
	runID    string
	watchdog int
	ready    bool
}

func (p *ownerProc) pid() int { return p.cmd.Process.Pid }

func (p *ownerProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startOwner starts a test process in mode (the watchdog on, or sweep
// only) and waits until its sandboxes run.
func (d *demo) startOwner(ctx context.Context, mode reaper.Mode) (*ownerProc, error) {
	cmd := exec.Command(d.exe, demoOwnerCommand, "--image", d.ref, "--demo", d.id)
	// Keep the name this program was run by: a test binary standing in
	// for rightsize (testscript) dispatches on it.
	cmd.Args[0] = os.Args[0]
	cmd.Env = ownerEnv(os.Environ(),
		ledger.EnvCacheDir+"="+d.cache,
		backend.EnvBackend+"="+backend.Docker,
		reaper.EnvReaper+"="+mode.String())
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	p := &ownerProc{cmd: cmd, stdin: inW, lines: make(chan string, 8), done: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &p.stderr
	started := time.Now()
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting the test process %s: %w", d.exe, err)
	}
	d.owners = append(d.owners, p)
	go func() {
		defer close(p.lines)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()

	timeout := time.NewTimer(readyTimeout)
	defer timeout.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout.C:
			return nil, fmt.Errorf("the test process (pid %d) was not ready after %s", p.pid(), readyTimeout)
		case line, ok := <-p.lines:
			if !ok {
				<-p.done
				return nil, fmt.Errorf("the test process failed (%v): %s", p.waitErr, firstNonEmpty(lastLine(p.stderr.String()), "no output"))
			}
			if p.read(line) {
				wd := "no watchdog"
				if p.watchdog != 0 {
					wd = fmt.Sprintf("watchdog pid %d", p.watchdog)
				}
				d.printf("   pid %d, run %s, %s: ready in %s\n", p.pid(), termtext.Quote(p.runID), wd, ms(time.Since(started)))
				return p, nil
			}
		}
	}
}

// read takes in a line of the test process's protocol; true for "ready".
func (p *ownerProc) read(line string) bool {
	word, arg, _ := strings.Cut(line, " ")
	switch word {
	case "run":
		p.runID = arg
	case "watchdog":
		p.watchdog, _ = strconv.Atoi(arg)
	case "ready":
		p.ready = true
	}
	return p.ready
}

// drain reads what an exited test process wrote that the demo had not
// read yet: interrupted while it started, the demo may not have seen its
// run id, which is how its network is found. The lines end with the
// process; a descendant holding its stdout does not hold the demo up.
func (p *ownerProc) drain() {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				return
			}
			p.read(line)
		case <-t.C:
			return
		}
	}
}

// ownerEnv is the test process's environment: this one, with set applied,
// and Ryuk off unless the user chose otherwise.
func ownerEnv(base []string, set ...string) []string {
	if _, ok := os.LookupEnv(envRyukDisabled); !ok {
		set = append(set, envRyukDisabled+"=true")
	}
	return envlist.Merge(base, set...)
}

// kill SIGKILLs the process, waits until it is reaped (so that its pid is
// free, as after a real crash), and returns when the signal was sent.
func (d *demo) kill(p *ownerProc) time.Time {
	t := time.Now()
	if !p.exited() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
	p.stdin.Close()
	return t
}

// waitGone polls the engine until nothing of run id is left, and returns
// how long after since the last container and the last network went.
func (d *demo) waitGone(ctx context.Context, runID string, since time.Time) (lastCtr, lastNet time.Duration, err error) {
	deadline := time.Now().Add(goneTimeout)
	ctrGone, netGone := false, false
	for {
		ctrs, nets, err := d.resources(ctx, runLabel(runID))
		if err != nil {
			return 0, 0, err
		}
		now := time.Since(since)
		if len(ctrs) == 0 && !ctrGone {
			ctrGone, lastCtr = true, now
		}
		if len(nets) == 0 && !netGone {
			netGone, lastNet = true, now
		}
		if ctrGone && netGone {
			return lastCtr, lastNet, nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("%s after, the engine still lists %d containers and %d networks of run %s", goneTimeout, len(ctrs), len(nets), runID)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return 0, 0, err
		}
	}
}

// waitWatchdog waits until the watchdog process has exited: it deletes the
// run's ledger files after its last removal.
func (d *demo) waitWatchdog(ctx context.Context, p *ownerProc) error {
	if p.watchdog == 0 {
		return nil
	}
	deadline := time.Now().Add(goneTimeout)
	for time.Now().Before(deadline) {
		if _, alive, err := ledger.Lookup(p.watchdog); err == nil && !alive {
			return nil
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
	return fmt.Errorf("the watchdog (pid %d) still runs %s after its owner died", p.watchdog, goneTimeout)
}

// resources lists the containers (running or not) and networks carrying
// any of labels ("key=value"), each once.
func (d *demo) resources(ctx context.Context, labels ...string) (ctrs []container.Summary, nets []network.Summary, err error) {
	seen := map[string]bool{}
	fresh := func(id string) bool {
		was := seen[id]
		seen[id] = true
		return !was
	}
	for _, l := range labels {
		// The engine ANDs label filters: one request per label.
		f := client.Filters{}.Add("label", l)
		cl, err := d.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			return nil, nil, fmt.Errorf("listing containers: %w", err)
		}
		for _, c := range cl.Items {
			if fresh(c.ID) {
				ctrs = append(ctrs, c)
			}
		}
		nl, err := d.api.NetworkList(ctx, client.NetworkListOptions{Filters: f})
		if err != nil {
			return nil, nil, fmt.Errorf("listing networks: %w", err)
		}
		for _, n := range nl.Items {
			if fresh(n.ID) {
				nets = append(nets, n)
			}
		}
	}
	return ctrs, nets, nil
}

// runLabel selects what sandboxtest started for run id.
func runLabel(runID string) string { return docker.LabelRunID + "=" + runID }

// labels select everything of this demo on the engine: its containers by
// the demo's label, its networks (which carry only their run's labels) by
// the runs its test processes announced.
func (d *demo) labels() []string {
	out := []string{demoLabel + "=" + d.id}
	for _, p := range d.owners {
		if p.runID != "" {
			out = append(out, runLabel(p.runID))
		}
	}
	return out
}

// list prints what the engine has of run id, as `docker ps` and `docker
// network ls` would.
func (d *demo) list(ctx context.Context, runID string) error {
	ctrs, nets, err := d.resources(ctx, runLabel(runID))
	if err != nil {
		return err
	}
	if len(ctrs)+len(nets) == 0 {
		d.printf("   the engine lists nothing of run %s\n", termtext.Quote(runID))
		return nil
	}
	tw := d.table("   ")
	if len(ctrs) > 0 {
		fmt.Fprintln(tw, "CONTAINER ID\tIMAGE\tCOMMAND\tSTATUS\tNAMES")
		for _, c := range ctrs {
			name := c.ID
			if len(c.Names) > 0 {
				name = strings.TrimPrefix(c.Names[0], "/")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", short(c.ID), termtext.Quote(c.Image), strconv.Quote(c.Command), termtext.Quote(c.Status), termtext.Quote(name))
		}
	}
	tw.Flush()
	tw = d.table("   ")
	if len(nets) > 0 {
		fmt.Fprintln(tw, "NETWORK ID\tNAME\tDRIVER")
		for _, n := range nets {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", short(n.ID), termtext.Quote(n.Name), termtext.Quote(n.Driver))
		}
	}
	tw.Flush()
	return nil
}

// cleanup runs whatever happened: it kills a test process still running,
// removes everything labelled with the demo's id, waits for the watchdogs,
// and deletes the cache dir. It says what it removed.
func (d *demo) cleanup() (string, error) {
	var errs []error
	var did []string
	for _, p := range d.owners {
		if !p.exited() {
			d.killedEarly = d.killedEarly || !p.ready
			d.kill(p)
			did = append(did, fmt.Sprintf("killed the test process (pid %d)", p.pid()))
		}
		p.stdin.Close()
		p.drain()
	}
	if d.api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), goneTimeout)
		nc, nn, err := d.removeLabelled(ctx, d.labels(), d.killedEarly)
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
		if nc+nn > 0 {
			did = append(did, fmt.Sprintf("removed %d %s and %d %s", nc, plural(nc, "container", "containers"), nn, plural(nn, "network", "networks")))
		}
	}
	for _, p := range d.owners {
		if err := d.waitWatchdog(context.Background(), p); err != nil {
			errs = append(errs, err)
		}
	}
	if d.cache != "" {
		if err := os.RemoveAll(d.cache); err != nil {
			errs = append(errs, err)
		} else {
			did = append(did, "deleted the cache dir")
		}
	}
	return strings.Join(did, ", "), errors.Join(errs...)
}

// removeLabelled removes every container, then every network, carrying
// any of labels. When a test process was killed while it was still
// creating them (lookTwice), the engine may finish a creation after the
// first pass: it looks again until two passes in a row find nothing. A
// removal that fails (one the watchdog or an interrupted sweep has in
// progress, a network a container still holds) is tried again at the next
// pass, until ctx ends; its error is returned only if it is still there.
func (d *demo) removeLabelled(ctx context.Context, labels []string, lookTwice bool) (containers, networks int, err error) {
	quiet := 0
	var last error
	for quiet < 2 {
		ctrs, nets, err := d.resources(ctx, labels...)
		if err != nil {
			return containers, networks, errors.Join(last, err)
		}
		if len(ctrs)+len(nets) == 0 {
			if !lookTwice {
				return containers, networks, nil
			}
			quiet++
		} else {
			quiet = 0
		}
		last = nil
		var names []string
		for _, c := range ctrs {
			names = append(names, c.ID)
		}
		for i, err := range d.drv.RemoveIDs(ctx, backend.SandboxKind, names) {
			if err == nil {
				containers++
			} else if !errors.Is(err, backend.ErrNotFound) {
				last = fmt.Errorf("removing container %s: %w", short(names[i]), err)
			}
		}
		names = names[:0]
		for _, n := range nets {
			names = append(names, n.ID)
		}
		for i, err := range d.drv.RemoveIDs(ctx, backend.NetworkKind, names) {
			if err == nil {
				networks++
			} else if !errors.Is(err, backend.ErrNotFound) {
				last = fmt.Errorf("removing network %s: %w", short(names[i]), err)
			}
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return containers, networks, errors.Join(last, err)
		}
	}
	return containers, networks, nil
}

// verify checks, from the engine and the file system, that nothing of the
// demo is left; left says what is.
func (d *demo) verify() (left string, err error) {
	var parts []string
	if d.api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), goneTimeout)
		defer cancel()
		labels := d.labels()
		ctrs, nets, err := d.resources(ctx, labels...)
		if err != nil {
			return "", err
		}
		if len(ctrs)+len(nets) > 0 {
			parts = append(parts, fmt.Sprintf("the engine still lists %d containers and %d networks labelled %s", len(ctrs), len(nets), strings.Join(labels, " or ")))
		}
	}
	if d.cache != "" {
		if _, err := os.Lstat(d.cache); !errors.Is(err, fs.ErrNotExist) {
			parts = append(parts, fmt.Sprintf("the cache dir %s is still there", termtext.Quote(d.cache)))
		}
	}
	return strings.Join(parts, "; "), nil
}

// Write writes to stdout, as printf does.
func (d *demo) Write(p []byte) (int, error) {
	d.printf("%s", p)
	return len(p), nil
}

func (d *demo) printf(format string, a ...any) {
	if _, err := fmt.Fprintf(d.c.stdout, format, a...); err != nil && !d.outputGone.Swap(true) {
		d.cancel()
	}
}

func (d *demo) step(n int, title string) {
	d.printf("\n%s\n", d.c.paint(sgrBold, fmt.Sprintf("%d. %s", n, title)))
}

// table is a tabwriter whose lines start with prefix.
func (d *demo) table(prefix string) *tabwriter.Writer {
	return tabwriter.NewWriter(&prefixWriter{w: d, prefix: prefix, atStart: true}, 0, 4, 3, ' ', 0)
}

// prefixWriter starts every line with prefix.
type prefixWriter struct {
	w       io.Writer
	prefix  string
	atStart bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	var out bytes.Buffer
	for _, c := range b {
		if p.atStart {
			out.WriteString(p.prefix)
		}
		out.WriteByte(c)
		p.atStart = c == '\n'
	}
	if _, err := p.w.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + " ms" }

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s" }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// lockedBuffer collects a process's stderr, written by exec's copying
// goroutine and read by the demo.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
