//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/e2e/chaos/internal/plan"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// The labels the product puts on what a run makes, spelled out here so
// that a renamed label fails the harness instead of following it.
const (
	labelRun       = "dev.rightsize.runId"
	labelRunAlt    = "dev.rightsize.run_id"
	labelKeepAlive = "dev.rightsize.reuse"
	labelKeeper    = "dev.rightsize.keeper"
)

// dockerSide is a Docker-API engine (Docker, or Podman's service): what
// it creates and removes is read from its event stream, as it happens;
// which process asked for a removal, from the proxy every process of the
// run goes through.
type dockerSide struct {
	podman bool
	socket string // the engine's own socket
	cli    *client.Client
	proxy  *apiProxy
	faults *faults

	mu        sync.Mutex
	objs      map[string]*dockerObj // by id
	last      time.Time             // the last event's time: a stream taken up again starts there
	seen      map[string]bool       // events already taken (a stream taken up again repeats some)
	restarts  [][2]time.Time        // when the engine was down: its containers died of it
	restarted bool
}

type dockerObj struct {
	obj   object
	first time.Time // its first kill or die event
}

func (d *dockerSide) setup(ctx context.Context, h *harness, e *engine) error {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	sock, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		return fmt.Errorf("DOCKER_HOST=%s: the harness needs the engine's unix socket", host)
	}
	d.socket = sock
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{}); err != nil {
		cli.Close()
		return fmt.Errorf("no engine answers at %s (make engine): %w", host, err)
	}
	d.cli, d.objs, d.seen = cli, map[string]*dockerObj{}, map[string]bool{}
	img, err := testimage.BusyboxRef()
	if err != nil {
		return err
	}
	e.image = img
	if e.faults != nil {
		d.faults = e.faults
	}
	d.proxy, err = startProxy(filepath.Join(h.work, "engine.sock"), sock, d.faults)
	if err != nil {
		return err
	}
	e.env = append(e.env, "DOCKER_HOST=unix://"+d.proxy.path, "RIGHTSIZE_BACKEND=docker", "TESTCONTAINERS_HOST_OVERRIDE=localhost")
	return nil
}

// follow reads the engine's events from the harness's start until ctx
// ends, taking the stream up again where it broke (an engine restart).
func (d *dockerSide) follow(ctx context.Context, h *harness) {
	d.mu.Lock()
	d.last = h.start.Add(-time.Second)
	d.mu.Unlock()
	for ctx.Err() == nil {
		d.mu.Lock()
		since := d.last
		d.mu.Unlock()
		f := client.Filters{}.Add("type", "container").Add("type", "network")
		res := d.cli.Events(ctx, client.EventsListOptions{Since: fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()), Filters: f})
	stream:
		for {
			select {
			case m := <-res.Messages:
				d.take(ctx, h, m)
			case err := <-res.Err:
				if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					h.note("the engine's event stream broke, and was taken up again: " + firstLine(err.Error()))
				}
				break stream
			case <-ctx.Done():
				break stream
			}
		}
		// Until the engine answers again.
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := d.cli.Ping(pctx, client.PingOptions{})
			cancel()
			if err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// take is one event of the engine's.
func (d *dockerSide) take(ctx context.Context, h *harness, m events.Message) {
	at := time.Unix(0, m.TimeNano)
	key := fmt.Sprintf("%s %s %s %d", m.Type, m.Action, m.Actor.ID, m.TimeNano)
	d.mu.Lock()
	if d.seen[key] {
		d.mu.Unlock()
		return
	}
	d.seen[key] = true
	if at.After(d.last) {
		d.last = at
	}
	o := d.objs[m.Actor.ID]
	d.mu.Unlock()
	attrs := m.Actor.Attributes
	name := strings.TrimPrefix(attrs["name"], "/")
	kind := string(m.Type)
	switch {
	case m.Action == events.ActionCreate:
		obj := object{kind: kind, name: name, id: m.Actor.ID, at: at}
		if kind == "container" {
			obj.run = firstOf(attrs[labelRun], attrs[labelRunAlt])
			obj.keepAlive = attrs[labelKeepAlive]
			if attrs[labelKeeper] != "" {
				obj.kind, obj.run = "keeper", attrs[labelKeeper]
			}
			obj.createdBy = d.proxy.creator("container", name)
		} else {
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if res, err := d.cli.NetworkInspect(ictx, m.Actor.ID, client.NetworkInspectOptions{}); err == nil {
				obj.run = firstOf(res.Network.Labels[labelRun], res.Network.Labels[labelRunAlt])
			}
			cancel()
			if obj.run == "" {
				obj.run = h.runOfNetwork(name)
			}
		}
		if kind == "container" && obj.run == "" && attrs[plan.LabelHarness] == h.id() {
			// Made with plain testcontainers-go under GuardAll, which
			// labels all it guards: this one escaped the guard.
			h.escapedGuard(attrs[plan.LabelOwner], name, at)
			return
		}
		if obj.run == "" && obj.keepAlive == "" && !strings.HasPrefix(name, "rz-") {
			return // not the run's: another test of the engine's
		}
		d.mu.Lock()
		d.objs[m.Actor.ID] = &dockerObj{obj: obj}
		d.mu.Unlock()
		h.created(obj)
	case o == nil:
	case m.Action == events.ActionKill || m.Action == events.ActionDie:
		d.mu.Lock()
		if o.first.IsZero() && !d.downAt(at) {
			o.first = at
		}
		d.mu.Unlock()
	case m.Action == events.ActionDestroy || m.Action == events.ActionRemove:
		d.mu.Lock()
		delete(d.objs, m.Actor.ID)
		d.mu.Unlock()
		rc := d.proxy.remover(kind, m.Actor.ID, o.obj.name, at)
		earliest := at
		if !o.first.IsZero() && o.first.Before(at) {
			// Killed before it went: killed by whom? Not by its owner's own
			// stop (or it would have asked first).
			earliest = o.first
			for _, c := range d.proxy.touches(m.Actor.ID, o.obj.name) {
				if !c.at.After(o.first.Add(50 * time.Millisecond)) {
					if h.isOwnerAt(o.obj.run, c.pid, c.at) {
						earliest = at
					}
					break
				}
			}
		}
		if o.obj.kind == "keeper" {
			h.forget(o.obj)
			return
		}
		id, name := m.Actor.ID, o.obj.name
		unheard := func() (bool, string) {
			// Asked again at the end: when the event came, the engine's
			// answer may not have reached the proxy yet.
			rc := d.proxy.remover(kind, id, name, at)
			return rc.sent && !rc.heard, rc.fault
		}
		h.removedAt(o.obj, rc.pid, rc.at, at, earliest, unheard)
	}
}

// downAt: the engine was restarting at instant at.
func (d *dockerSide) downAt(at time.Time) bool {
	for _, w := range d.restarts {
		if !at.Before(w[0]) && (w[1].IsZero() || !at.After(w[1])) {
			return true
		}
	}
	return false
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func (d *dockerSide) settle(ctx context.Context, h *harness) {
	// The events of the last removals are a moment behind them.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		d.mu.Lock()
		caught := time.Since(d.last) > time.Second
		d.mu.Unlock()
		if caught {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leftovers lists the engine's containers and networks of the run's
// owners, their keepers, and the commands still running in the
// keep-alive sandboxes they used.
func (d *dockerSide) leftovers(ctx context.Context, h *harness) []leftover {
	var out []leftover
	ours := func(run string) (*owner, bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		o := h.byRun[run]
		return o, o != nil
	}
	for _, l := range []string{labelRun, labelRunAlt, labelKeeper} {
		res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", l)})
		if err != nil {
			out = append(out, leftover{msg: "listing the engine's containers: " + err.Error()})
			continue
		}
		for _, c := range res.Items {
			run := c.Labels[l]
			o, ok := ours(run)
			if !ok {
				continue
			}
			what := "container"
			if l == labelKeeper {
				what = "keeper"
			}
			out = append(out, leftover{owner: o, msg: fmt.Sprintf("%s %s of run %s (owner #%d, %s) is still on the engine after every owner died and a sweep ran", what, strings.TrimPrefix(firstOf(c.Names...), "/"), run, o.plan.Index, c.State)})
		}
	}
	for _, l := range []string{labelRun, labelRunAlt} {
		res, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.Add("label", l)})
		if err != nil {
			continue
		}
		for _, n := range res.Items {
			if o, ok := ours(n.Labels[l]); ok {
				out = append(out, leftover{owner: o, msg: fmt.Sprintf("network %s of run %s (owner #%d) is still on the engine after every owner died and a sweep ran", n.Name, n.Labels[l], o.plan.Index)})
			}
		}
	}
	if res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", plan.LabelHarness+"="+h.id())}); err == nil {
		for _, c := range res.Items {
			if firstOf(c.Labels[labelRun], c.Labels[labelRunAlt]) == "" {
				out = append(out, leftover{owner: h.ownerByIndex(c.Labels[plan.LabelOwner]), msg: fmt.Sprintf("container %s, made with testcontainers-go under GuardAll by owner #%s, escaped the guard and is still on the engine (%s)", strings.TrimPrefix(firstOf(c.Names...), "/"), c.Labels[plan.LabelOwner], c.State)})
			}
		}
	}
	for _, name := range h.keepAlives() {
		top, err := d.cli.ContainerTop(ctx, name, client.ContainerTopOptions{})
		if err != nil {
			continue
		}
		for _, p := range top.Processes {
			if cmd := strings.Join(p, " "); strings.Contains(cmd, "sleep 1000") {
				out = append(out, leftover{msg: fmt.Sprintf("a command an owner ran in keep-alive sandbox %s still runs after every owner died: %s", name, cmd)})
			}
		}
	}
	return out
}

// cleanup removes the keep-alive sandboxes the owners used, and anything
// of their runs still on the engine, once every check is done.
func (d *dockerSide) cleanup(ctx context.Context, h *harness) {
	for _, name := range h.keepAlives() {
		_, _ = d.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
	// A keep-alive whose owner died before it said it held it: known by
	// the harness's tag in its spec.
	if res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", labelKeepAlive)}); err == nil {
		for _, c := range res.Items {
			in, err := d.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
			if err != nil || in.Container.Config == nil {
				continue
			}
			for _, e := range in.Container.Config.Env {
				if strings.HasPrefix(e, "RZ_CHAOS_KA="+h.keepAliveTag()+"-") {
					_, _ = d.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
					break
				}
			}
		}
	}
	if res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", plan.LabelHarness+"="+h.id())}); err == nil {
		for _, c := range res.Items {
			_, _ = d.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	for _, l := range []string{labelRun, labelRunAlt, labelKeeper} {
		res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", l)})
		if err != nil {
			continue
		}
		for _, c := range res.Items {
			if h.ownsRun(c.Labels[l]) {
				_, _ = d.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
	}
	for _, l := range []string{labelRun, labelRunAlt} {
		res, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.Add("label", l)})
		if err != nil {
			continue
		}
		for _, n := range res.Items {
			if h.ownsRun(n.Labels[l]) {
				_, _ = d.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			}
		}
	}
}

func (d *dockerSide) close() {
	if d.proxy != nil {
		d.proxy.stop()
		if *keepFlag {
			d.proxy.dump(filepath.Join(filepath.Dir(d.proxy.path), "calls.log"))
		}
	}
	if d.restarted {
		// Never leave the machine without its engine.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := ensureEngine(ctx, nil); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: the engine does not answer after its restarts, and could not be started: %v\n", err)
		}
		cancel()
	}
	if d.cli != nil {
		d.cli.Close()
	}
}

// keepAliveTag keeps this harness's keep-alive identities apart from any
// other's: each owner's keep-alive spec carries it in RZ_CHAOS_KA.
func (h *harness) keepAliveTag() string { return strconv.FormatInt(h.seed, 36) + "-" + h.id() }

// keepAlives are the names of the keep-alive sandboxes any owner held.
func (h *harness) keepAlives() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, o := range h.owners {
		for _, k := range o.keep {
			if strings.HasPrefix(k.name, "rz-reuse-") && !slices.Contains(out, k.name) {
				out = append(out, k.name)
			}
		}
	}
	return out
}

func (h *harness) ownsRun(run string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return run != "" && h.byRun[run] != nil
}

// isOwnerAt: pid was the owner of run at instant at.
func (h *harness) isOwnerAt(run string, pid int, at time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := h.byRun[run]
	return o != nil && o.pid == pid && !at.Before(o.spawnAt) && (o.exitAt.IsZero() || !at.After(o.exitAt))
}

// runOfNetwork is the run of a network an owner said it made.
func (h *harness) runOfNetwork(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.owners {
		for _, e := range o.events {
			if strings.HasSuffix(e.text, " network "+name) && o.run != "" {
				return o.run
			}
		}
	}
	return ""
}

// escapedGuard: a container owner idx made with testcontainers-go under
// GuardAll reached the engine without the guard's labels.
func (h *harness) escapedGuard(idx, name string, at time.Time) {
	o := h.ownerByIndex(idx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if o != nil {
		o.eventLocked(at, "container %s made past the guard (no run label)", name)
	}
	h.defectLocked("", o, fmt.Sprintf("container %s, made with testcontainers-go under sandboxtest.GuardAll by owner #%s, reached the engine without the guard's labels: it escaped the guard", name, idx))
}

// ownerByIndex is owner #idx.
func (h *harness) ownerByIndex(idx string) *owner {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.owners {
		if fmt.Sprint(o.plan.Index) == idx {
			return o
		}
	}
	return nil
}
