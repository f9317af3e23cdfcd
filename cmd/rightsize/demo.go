package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/internal/image"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

const (
	envRyukDisabled = "TESTCONTAINERS_RYUK_DISABLED" // Ryuk's image cannot be pulled without a registry, and rightsize needs no Ryuk
	demoLabel       = "dev.rightsize.demo"           // on the demo's containers, for whoever shares the engine
	readyTimeout    = 60 * time.Second               // a test process's start, and its exit once told
	goneTimeout     = 30 * time.Second               // each wait for the watchdog or a sweep
	// A demo killed outright leaves its cache dir, holding its record, to the next demo's sweep.
	demoDirPrefix, demoRecordFile = "rightsize-demo-", "demo.json"
)

// demo is one run of `rightsize demo`. It creates and removes nothing itself:
// its test processes create through the reaper's session, the watchdog and the
// sweep remove, and it looks at the engine through the backend's listing of a run.
type demo struct {
	c              *cli
	id, ref, cache string
	drv            *docker.Driver
	stop           context.CancelFunc
	outputGone     bool // printf runs on the demo's goroutine only
	owners         []*owner
}

func (c *cli) demo(args []string) error {
	if stop, err := c.parse("demo", newFlags("demo"), args, 0); stop {
		return err
	}
	start := time.Now()
	// printf notices a closed stdout and stops the steps: Go's default would skip the clean-up.
	signal.Ignore(syscall.SIGPIPE)
	sig, unnotify := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer unnotify()
	ctx, stop := context.WithCancel(sig)
	defer stop()
	d := &demo{c: c, id: fmt.Sprintf("%08x", rand.Uint32()), stop: stop}
	err := d.steps(ctx)
	did, left := d.cleanup()
	msg := or(did, "nothing was started yet") + or(left, "; nothing is left")
	switch {
	case d.outputGone:
		return fmt.Errorf("demo: its output was closed; stopped, %s", msg)
	case sig.Err() != nil:
		return &exitError{code: exitInterrupted, msg: "demo interrupted: " + msg}
	case err != nil && did+left != "":
		return fmt.Errorf("demo: %w (cleaned up: %s)", err, msg)
	case err != nil || left != "":
		return fmt.Errorf("demo: %w%s", or(err, errors.New("cleaning up")), left)
	}
	d.printf("\n%s the engine lists nothing of runs %s and %s, and the demo's cache dir is removed (%s in all).\n",
		c.paint(sgrGreen, "Everything is gone:"), d.owners[0].run, d.owners[1].run, seconds(time.Since(start)))
	return nil
}

func (d *demo) steps(ctx context.Context) (err error) {
	d.printf("%s\n\n", d.c.paint(sgrBold, "rightsize demo: whatever kills a test process, its sandboxes go away"))
	if _, ok := os.LookupEnv(envRyukDisabled); !ok {
		os.Setenv(envRyukDisabled, "true") // for this process and its test processes
	}
	octx, cancel := context.WithTimeout(ctx, backend.ResolveTimeout)
	defer cancel()
	if d.drv, err = docker.Open(octx); err != nil {
		return or(ctx.Err(), fmt.Errorf("no Docker engine answers (%v); run `make engine` (as root on Debian it installs and starts dockerd), or point DOCKER_HOST at one", err))
	}
	t0 := time.Now()
	if d.ref, err = demoImage(ctx, d.drv.Client()); err != nil {
		return fmt.Errorf("the demo's image: %w", err)
	}
	took, earlier := time.Since(t0), d.sweepEarlier(ctx)
	if d.cache, err = os.MkdirTemp("", demoDirPrefix+d.id+"-"); err != nil {
		return err
	}
	// The demo's record tells a later demo whether this one still runs.
	if run, err := ledger.NewRun(d.cache, ledger.Owner{Backend: d.drv.Name()}); err != nil {
		return err
	} else if err := os.WriteFile(filepath.Join(d.cache, demoRecordFile), run.Record().Marshal(), 0o600); err != nil {
		return err
	}
	d.printf("  engine  %s\n  image   %s (FROM scratch: a static busybox; ready in %s)\n", termtext.Quote(docker.SpokenEndpoint(d.drv.Endpoint())), d.ref, ms(took))
	d.printf("  ledger  %s (a cache dir of its own, removed at the end)\n  label   %s=%s (on the containers the demo starts)\n%s",
		termtext.Quote(d.cache), demoLabel, d.id, earlier)

	d.step(1, "A test process starts two guarded containers and a network (watchdog on)")
	p, err := d.startOwner(ctx, reaper.On)
	if err != nil {
		return err
	}
	d.show(ctx, p)
	d.step(2, fmt.Sprintf("SIGKILL the test process (pid %d): none of its own cleanup can run", p.pid))
	killed := p.kill()
	d.step(3, "Its watchdog sees its pipe close, and removes everything")
	gone, err := d.waitGone(ctx, p.run, killed)
	if err != nil {
		return err
	}
	d.printf("   last container gone %s after the kill, the network %s after\n", d.c.paint(sgrGreen, ms(gone[0])), ms(gone[1]))
	d.show(ctx, p)
	d.printf("   and its ledger files are deleted\n")

	d.step(4, "Again with the watchdog off (RIGHTSIZE_REAPER=sweep in the test process's environment)")
	if p, err = d.startOwner(ctx, reaper.SweepOnly); err != nil {
		return err
	}
	d.show(ctx, p)
	// Killed before it is announced: a demo killed at that line leaves these to the next demo.
	killed = p.kill()
	d.step(5, fmt.Sprintf("SIGKILL it (pid %d): this time nothing is watching", p.pid))
	if err := poll(ctx, "", func() bool { return time.Since(killed) >= time.Second }); err != nil {
		return err
	}
	d.printf("   1.0 s later the leftovers are still there:\n")
	d.show(ctx, p)
	if rf, err := ledger.ReadRun(d.cache, p.run); err == nil {
		r := describeRun(rf, time.Now()) // as `rightsize ls` shows it
		d.printf("   the ledger lists run %s: owner %s (%s), %s, %s\n", r.ID, d.c.paint(statusColour(r.Status), r.Status),
			oneLine(r.Reason), backend.SandboxKind.Noun(len(r.Sandboxes)), backend.NetworkKind.Noun(len(r.Networks)))
	}
	d.step(6, "The next process's sweep removes them (every test process sweeps at its first sandbox)")
	t0 = time.Now()
	rep, err := reaper.Sweep(ctx, d.drv, reaper.WithCacheDir(d.cache)) // what reaper.Open does first
	if took = time.Since(t0); err != nil || !rep.Clean() {
		return or(err, fmt.Errorf("the sweep kept %s back", keptSummary(rep)))
	}
	var b bytes.Buffer
	rep.WriteTo(&b)
	d.printf("   %s\n   leftovers removed by the sweep in %s\n", strings.ReplaceAll(strings.TrimSpace(termtext.CleanText(b.String())), "\n", "\n   "), d.c.paint(sgrGreen, ms(took)))
	d.show(ctx, p)
	return nil
}

// show prints what the backend finds of p's run by its label, as the watchdog does.
func (d *demo) show(ctx context.Context, p *owner) {
	row := func(c ...any) string {
		return strings.TrimRight(fmt.Sprintf("   %-14s%-9s%-17s%-37s%s", c...), " ") + "\n"
	}
	out := row("ENGINE ID", "KIND", "NAME", "IMAGE", "STATUS")
	for _, k := range []backend.Kind{backend.SandboxKind, backend.NetworkKind} {
		ids, err := d.drv.ListRun(ctx, k, p.run)
		if err != nil {
			d.printf("   (the engine cannot be listed: %s)\n", oneLine(err.Error()))
			return
		}
		for _, id := range ids {
			name, image, status := names.NetworkPrefix+p.run, "", ""
			if k == backend.SandboxKind {
				name, status = "?", "not running"
				sb, err := d.drv.Adopt(ctx, id) // a running one; the engine takes an id for a name
				if dsc, ok := sb.(backend.Describer); ok && err == nil {
					if desc, err := dsc.Describe(ctx); err == nil {
						name, image, status = desc.Name, desc.Image, "running, created "+seconds(time.Since(desc.Created))+" ago"
					}
				}
			}
			out += row(id[:12], k, name, image, status)
		}
	}
	if strings.Count(out, "\n") == 1 {
		out = "   the engine lists nothing of run " + p.run + "\n"
	}
	d.printf("%s", out)
}

// waitGone polls the backend's listing of run, then the ledger (emptied last), until nothing
// is left; it returns how long after since the run's last container, then its network, went.
func (d *demo) waitGone(ctx context.Context, run string, since time.Time) (gone [2]time.Duration, err error) {
	for i, k := range []backend.Kind{backend.SandboxKind, backend.NetworkKind} {
		err = or(err, poll(ctx, "the engine still lists "+k.Plural()+" of run "+run, func() bool {
			ids, err := d.drv.ListRun(ctx, k, run)
			return err == nil && len(ids) == 0
		}))
		gone[i] = time.Since(since)
	}
	return gone, or(err, poll(ctx, "the ledger still lists run "+run, func() bool {
		_, err := ledger.ReadRun(d.cache, run)
		return errors.Is(err, fs.ErrNotExist)
	}))
}

// poll asks done every 10 ms until it says yes, for at most goneTimeout.
func poll(ctx context.Context, what string, done func() bool) error {
	for deadline := time.Now().Add(goneTimeout); !done(); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s after, %s", goneTimeout, what)
		}
	}
	return nil
}

// cleanup undoes what the steps got to: test processes close their sessions, their
// watchdogs finish, the demo's ledger is swept. It says what it did, and what is left.
func (d *demo) cleanup() (did, left string) {
	var dids, lefts []string
	ctx, cancel := context.WithTimeout(context.Background(), goneTimeout)
	defer cancel()
	for _, p := range d.owners {
		if p.cmd.ProcessState == nil { // it closes its session, as a test binary does at its end
			p.end()
			_ = p.cmd.Wait()
			dids = append(dids, strings.TrimSpace(fmt.Sprintf("the test process (pid %d) closed its session (%v) %s", p.pid, p.cmd.ProcessState, oneLine(p.stderr.String()))))
		}
		if err := poll(ctx, fmt.Sprintf("the watchdog (pid %d) still runs", p.watchdog), func() bool {
			_, alive, err := ledger.Lookup(p.watchdog) // it exits after its last removal
			return p.watchdog == 0 || err == nil && !alive
		}); err != nil {
			lefts = append(lefts, err.Error())
		}
	}
	if d.cache == "" {
		return "", "" // nothing was started
	}
	if len(lefts) == 0 {
		n, err := d.sweepDir(ctx, d.cache)
		if err == nil {
			return strings.Join(append(dids, "the sweep removed "+backend.SandboxKind.Noun(n[backend.SandboxKind])+" and "+backend.NetworkKind.Noun(n[backend.NetworkKind]), "deleted the cache dir"), ", "), ""
		}
		lefts = append(lefts, err.Error())
	}
	return strings.Join(dids, ", "), "; but " + strings.Join(lefts, "; ") + "; the cache dir " + termtext.Quote(d.cache) + " stays for the next demo's sweep"
}

// sweepDir sweeps the ledger in dir, deletes dir when nothing stays listed, and counts what it removed.
func (d *demo) sweepDir(ctx context.Context, dir string) (removed map[backend.Kind]int, err error) {
	rep, err := reaper.Sweep(ctx, d.drv, reaper.WithCacheDir(dir))
	if err == nil && (!rep.Clean() || rep.Count(reaper.LeftAlone) > 0) {
		err = fmt.Errorf("the sweep of %s left %d runs alone and kept %s back", dir, rep.Count(reaper.LeftAlone), or(keptSummary(rep), "nothing"))
	}
	removed = map[backend.Kind]int{}
	for i := 0; err == nil && i < len(rep.Runs); i++ {
		for _, it := range rep.Runs[i].Removed {
			if it.Outcome == ledger.Removed {
				removed[it.Kind]++
			}
		}
	}
	return removed, or(err, os.RemoveAll(dir))
}

// sweepEarlier sweeps the cache dirs of earlier demos that died, as the
// next test process sweeps a dead run's, and says what it did.
func (d *demo) sweepEarlier(ctx context.Context) string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), demoDirPrefix+"*"))
	var demos, containers, networks int
	for _, dir := range dirs {
		data, rerr := ledger.ReadFile(filepath.Join(dir, demoRecordFile), ledger.MaxRecordSize) // a FIFO planted there blocks nothing
		rec, perr := ledger.ParseRecord(data)
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || rerr != nil || perr != nil || ledger.Judge(rec).State != ledger.Dead {
			continue // alive, being made, not ours to judge, or a link planted in a shared folder
		}
		if n, err := d.sweepDir(ctx, dir); err == nil { // else something may still run: its dir keeps it listed
			containers, networks, demos = containers+n[backend.SandboxKind], networks+n[backend.NetworkKind], demos+1
		}
	}
	if demos == 0 {
		return ""
	}
	return fmt.Sprintf("  before  %d killed %s had left %d %s and %d %s: removed, and %s\n",
		demos, plural(demos, "demo", "demos"), containers, plural(containers, "container", "containers"),
		networks, plural(networks, "network", "networks"), plural(demos, "its cache dir", "their cache dirs"))
}

// owner is the demo's side of a test process (see demoOwner).
type owner struct {
	cmd           *exec.Cmd
	end           context.CancelFunc // closes its stdin: it closes its session, or is killed readyTimeout later
	stderr        bytes.Buffer       // read once it has exited
	run           string
	pid, watchdog int
}

// startOwner starts a test process in mode and reads its lines until its sandboxes run.
func (d *demo) startOwner(ctx context.Context, mode reaper.Mode) (*owner, error) {
	exe, err := os.Executable()
	octx, end := context.WithCancel(ctx)
	p := &owner{end: end, cmd: exec.CommandContext(octx, exe, demoOwnerCommand, d.ref, d.id)}
	p.cmd.Args[0] = os.Args[0] // a test binary standing in for rightsize (testscript) dispatches on it
	p.cmd.Env = envlist.Merge(os.Environ(), ledger.EnvCacheDir+"="+d.cache,
		backend.EnvBackend+"="+backend.Docker, reaper.EnvReaper+"="+mode.String())
	stdin, ierr := p.cmd.StdinPipe()
	out, oerr := p.cmd.StdoutPipe()
	if err = errors.Join(err, ierr, oerr); err != nil {
		return nil, fmt.Errorf("the test process: %w", err)
	}
	p.cmd.Stderr, p.cmd.Cancel, p.cmd.WaitDelay = &p.stderr, stdin.Close, readyTimeout
	started := time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the test process %s: %w", exe, err)
	}
	p.pid, d.owners = p.cmd.Process.Pid, append(d.owners, p)
	for sc := bufio.NewScanner(out); sc.Scan(); {
		switch f := strings.Fields(sc.Text()); {
		case len(f) == 2 && f[0] == "run":
			p.run = f[1]
		case len(f) == 2 && f[0] == "watchdog":
			p.watchdog, _ = strconv.Atoi(f[1])
		case len(f) == 1 && f[0] == "ready" && octx.Err() == nil:
			wd := "no watchdog"
			if p.watchdog != 0 {
				wd = fmt.Sprintf("watchdog pid %d", p.watchdog)
			}
			d.printf("   pid %d, run %s, %s: ready in %s\n", p.pid, p.run, wd, ms(time.Since(started)))
			return p, nil
		}
	}
	_ = p.cmd.Wait()
	return nil, or(ctx.Err(), fmt.Errorf("the test process failed (%v): %s", p.cmd.ProcessState, oneLine(p.stderr.String())))
}

// kill SIGKILLs p and waits until it is reaped, so that its pid is free,
// as after a real crash; it returns when the signal was sent.
func (p *owner) kill() time.Time {
	t := time.Now()
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	return t
}

// demoOwner is the test process (__demo-owner): through the reaper's session and the
// backend's driver, as sandboxtest does for a test, it creates a network and two
// containers ("run ID", "watchdog PID", "ready" on stdout), and closes its session
// when its stdin ends.
func demoOwner(args []string, stdout io.Writer) (err error) {
	// Ctrl-C is the demo's; a write to a demo that is gone must not kill this process.
	signal.Ignore(os.Interrupt, syscall.SIGPIPE)
	if len(args) != 2 || args[0] == "" || len(args[1]) != 8 || !names.LowerHex(args[1]) {
		return &usageError{msg: demoOwnerCommand + " is internal to `rightsize demo` (it wants IMAGE DEMO-ID)"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout) // a silent engine fails the start
	defer cancel()
	drv, err := backend.Resolve(ctx) // RIGHTSIZE_BACKEND=docker, from the demo
	if err != nil {
		return err
	}
	defer drv.Close()
	s, err := reaper.Open(ctx, drv)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close(context.WithoutCancel(ctx))) }()
	fmt.Fprintln(stdout, "run", s.RunID())
	net := names.NetworkPrefix + s.RunID() // the demo shows it by that name
	for i := 0; i <= 2 && err == nil; i++ {
		k, name := backend.NetworkKind, net
		if i > 0 {
			k, name = backend.SandboxKind, s.NextName()
		}
		spec := backend.Spec{Image: args[0], Cmd: []string{"sleep", "3600"}, RunID: s.RunID(),
			Labels: map[string]string{demoLabel: args[1]}, Networks: map[string][]string{net: {"sandbox-" + strconv.Itoa(i)}}}
		var note *reaper.WatchdogNote
		note, err = s.Create(ctx, k, name, func(ctx context.Context) (string, error) {
			if k == backend.NetworkKind {
				return drv.CreateNetwork(ctx, name, s.RunID())
			}
			sb, err := drv.Create(ctx, name, spec)
			if err != nil {
				return "", err
			}
			return sb.ID(), nil
		})
		if note != nil && note.Started {
			fmt.Fprintln(stdout, "watchdog", note.PID)
		} else if note != nil {
			err = or(err, note.Err) // the demo's first part needs one
		}
	}
	if err == nil {
		fmt.Fprintln(stdout, "ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
	return err
}

// demoImage returns the demo's image, a static busybox FROM scratch tagged
// with a hash of what goes in, made by package image as the test images are.
func demoImage(ctx context.Context, cli *client.Client) (ref string, err error) {
	bb, err := image.FindBusybox(ctx, func() (*client.Client, error) { return cli, nil })
	if err == nil {
		sum := sha256.Sum256(append([]byte("layout 2\n"), bb.Content...)) // a new layout when what goes in changes
		ref = "rightsize-demo/busybox:" + hex.EncodeToString(sum[:])[:12]
		_, err = image.Ensure(ctx, cli, ref, "demo-image.lock", func(ctx context.Context) error {
			arch, err := image.EngineArch(ctx, cli)
			if err == nil {
				err = bb.CheckArch(arch)
			}
			rootfs, terr := image.Tarball(append([]image.Entry{{Name: "tmp", Mode: 0o1777, Dir: true}}, bb.Entries([]string{"sh", "sleep"})...))
			if err = errors.Join(err, terr); err != nil {
				return err
			}
			return image.Import(ctx, cli, ref, rootfs, []string{"LABEL dev.rightsize.demo-image=1", image.PathEnv, `CMD ["sleep", "3600"]`}, "rightsize demo")
		})
	}
	return ref, err
}

func (d *demo) printf(format string, a ...any) {
	if _, err := fmt.Fprintf(d.c.stdout, format, a...); err != nil {
		d.outputGone = true
		d.stop()
	}
}

func (d *demo) step(n int, title string) {
	d.printf("\n%s\n", d.c.paint(sgrBold, fmt.Sprintf("%d. %s", n, title)))
}

func ms(d time.Duration) string      { return strconv.FormatInt(d.Milliseconds(), 10) + " ms" }
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s" }

// or is a, or b when a is the zero value.
func or[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}
