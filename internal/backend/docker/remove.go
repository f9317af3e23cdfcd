package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/origin"
)

// CallTimeout bounds each engine call a removal makes: an engine that
// takes the connection and never answers must not hold a sweep, or a
// test's first sandbox, for ever.
const CallTimeout = 30 * time.Second

// Remove removes those of the named containers or networks that carry run
// runID's label (either spelling): each is looked up, its labels checked,
// and it is removed by the id the lookup gave, so that a name that changed
// hands in between is never removed. Something of that name without the
// label, and every keep-alive container, is left alone: ErrNotOwned.
func (d *Driver) Remove(ctx context.Context, k backend.Kind, runID string, names []string) []error {
	if runID == "" {
		errs := make([]error, len(names))
		for i := range errs {
			errs[i] = errors.New("remove: no run id to check ownership against")
		}
		return errs
	}
	if k == backend.VolumeKind || k == backend.ImageKind {
		return forEach(names, d.removeParallel(), func(n string) error { return d.removeHeld(ctx, k, runID, n, true) })
	}
	return forEach(names, d.removeParallel(), func(n string) error {
		id, attached, err := d.owned(ctx, k, runID, n)
		if k == backend.NetworkKind && ambiguous.says(err) {
			return d.removeSameNamed(ctx, runID, n)
		}
		if err != nil {
			return err
		}
		if k == backend.NetworkKind {
			return d.removeNetwork(ctx, id, n, attached)
		}
		return d.removeID(ctx, k, id, n)
	})
}

// CheckOwned is Remove's lookup and ownership check alone: nothing is
// removed (a dry run).
func (d *Driver) CheckOwned(ctx context.Context, k backend.Kind, runID string, names []string) []error {
	if runID == "" {
		return d.Remove(ctx, k, runID, names) // every name: no run id to check against
	}
	if k == backend.VolumeKind || k == backend.ImageKind {
		return forEach(names, d.removeParallel(), func(n string) error { return d.removeHeld(ctx, k, runID, n, false) })
	}
	return forEach(names, d.removeParallel(), func(n string) error {
		_, _, err := d.owned(ctx, k, runID, n)
		return err
	})
}

// owned looks name up and returns its id when it is run runID's, and for
// a network how many containers are attached to it.
func (d *Driver) owned(ctx context.Context, k backend.Kind, runID, name string) (id string, attached int, err error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	var realName string
	var labels map[string]string
	if k == backend.NetworkKind {
		res, err := d.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
		if err != nil {
			return "", 0, classify("inspect network "+name, err)
		}
		id, realName, labels, attached = res.Network.ID, res.Network.Name, res.Network.Labels, len(res.Network.Containers)
	} else {
		res, err := d.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
		if err != nil {
			return "", 0, classify("inspect container "+name, err)
		}
		id, realName = res.Container.ID, trimSlash(res.Container.Name)
		if res.Container.Config != nil {
			labels = res.Container.Config.Labels
		}
	}
	if why := backend.NotOwnedWhy(runID, realName, labels); why == backend.UnlabelledWhy {
		return "", 0, fmt.Errorf("%s %s (%s): %w: %w", k, name, shortID(id), backend.ErrNotOwned, backend.ErrUnlabelled)
	} else if why != "" {
		return "", 0, fmt.Errorf("%s %s (%s): %w: %s", k, name, shortID(id), backend.ErrNotOwned, why)
	}
	return id, attached, nil
}

// removeSameNamed removes, of the networks named name (Docker allows
// several), those that carry run runID's label, each by its id; the others
// are left, and said to be not the run's. It returns nil when every one of
// that name was the run's and is gone.
func (d *Driver) removeSameNamed(ctx context.Context, runID, name string) error {
	lctx, cancel := context.WithTimeout(ctx, CallTimeout)
	nl, err := d.cli.NetworkList(lctx, client.NetworkListOptions{Filters: client.Filters{}.Add("name", name)})
	cancel()
	if err != nil {
		return classify("list networks named "+name, err)
	}
	var removed, others []string
	var errs []error
	unlabelled := true
	for _, n := range nl.Items {
		if n.Name != name { // the filter matches parts of names too
			continue
		}
		if why := backend.NotOwnedWhy(runID, n.Name, n.Labels); why != "" {
			others = append(others, shortID(n.ID))
			unlabelled = unlabelled && why == backend.UnlabelledWhy
			continue
		}
		if err := d.removeID(ctx, backend.NetworkKind, n.ID, name+" ("+shortID(n.ID)+")"); err != nil && !errors.Is(err, backend.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, shortID(n.ID))
	}
	switch {
	case len(errs) > 0:
		return errors.Join(errs...)
	case len(others) == 0 && len(removed) == 0:
		return fmt.Errorf("network %s: %w", name, backend.ErrNotFound)
	case len(others) == 0:
		return nil
	}
	what := fmt.Sprintf("%d other network(s) named %s (%s) without the run's label", len(others), name, strings.Join(others, ", "))
	if len(removed) > 0 {
		what = fmt.Sprintf("the run's %d network(s) of that name (%s) removed; %s", len(removed), strings.Join(removed, ", "), what)
	}
	if unlabelled {
		return fmt.Errorf("network %s: %s: %w: %w", name, what, backend.ErrNotOwned, backend.ErrUnlabelled)
	}
	return fmt.Errorf("network %s: %s: %w", name, what, backend.ErrNotOwned)
}

// RemoveUnlabelled removes, of the networks named, those that carry run
// runID's label, and those that carry no run label at all and were
// created at since or later (backend.UnlabelledRemover); each by the id
// its lookup gave. Docker allows several networks of one name: each is
// judged alone.
func (d *Driver) RemoveUnlabelled(ctx context.Context, runID string, names []string, since time.Time) []error {
	return forEach(names, d.removeParallel(), func(name string) error {
		if runID == "" || since.IsZero() {
			return fmt.Errorf("network %s: no run or no start to prove it the run's by: %w", name, backend.ErrNotOwned)
		}
		lctx, cancel := context.WithTimeout(ctx, CallTimeout)
		nl, err := d.cli.NetworkList(lctx, client.NetworkListOptions{Filters: client.Filters{}.Add("name", name)})
		cancel()
		if err != nil {
			return classify("list networks named "+name, err)
		}
		var errs, others []error
		found := 0
		for _, n := range nl.Items {
			if n.Name != name { // the filter matches parts of names too
				continue
			}
			found++
			why := backend.NotOwnedWhy(runID, n.Name, n.Labels)
			if why == backend.UnlabelledWhy && n.Created.Before(since) {
				why = fmt.Sprintf("it carries no run label and was made %s, before the run's owner started (%s)", n.Created.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))
			} else if why == backend.UnlabelledWhy {
				why = ""
			}
			if why != "" {
				others = append(others, fmt.Errorf("network %s (%s): %w: %s", name, shortID(n.ID), backend.ErrNotOwned, why))
				continue
			}
			if err := d.removeID(ctx, backend.NetworkKind, n.ID, name+" ("+shortID(n.ID)+")"); err != nil && !errors.Is(err, backend.ErrNotFound) {
				errs = append(errs, err)
			}
		}
		switch {
		case len(errs) > 0:
			return errors.Join(errs...)
		case found == 0:
			return fmt.Errorf("network %s: %w", name, backend.ErrNotFound)
		case len(others) > 0:
			return errors.Join(others...)
		}
		return nil
	})
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// removeID removes a container (forcefully, with its anonymous volumes), a
// network, a volume (by name) or an image by id; label is how messages name it. This is every removal
// of a run's container: the watchdog's, a sweep's, Main's at the end.
func (d *Driver) removeID(ctx context.Context, k backend.Kind, id, label string) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	switch k {
	case backend.VolumeKind:
		return d.removeVolume(ctx, id)
	case backend.ImageKind:
		return d.removeImage(ctx, id)
	}
	if k == backend.NetworkKind {
		res, err := d.cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
		if err != nil {
			return classify("inspect network "+label, err)
		}
		return d.removeNetwork(ctx, id, label, len(res.Network.Containers))
	}
	podman, known := d.engineKind()
	switch {
	case podman:
		// Docker's forced removal kills at once; Podman's stops first,
		// with the container's stop signal and timeout (10 s for a
		// libpod-created one that ignores SIGTERM), unless its own API is
		// asked with a timeout of 0.
		if done, err := d.podmanRemove(ctx, id, label); done {
			return err
		}
		// Its Docker API's stop with a timeout of 0 sends SIGKILL alone
		// and waits for the exit; the kill is for a stop refused. Either
		// way the container is not running when the forced removal below
		// comes, which would otherwise send its stop signal first.
		zero := 0
		if _, err := d.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &zero}); err != nil {
			_, _ = d.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
		}
	case !known:
		// The engine did not say what it is (its version not answered in
		// time, under load): were it Podman, the forced removal would
		// send the stop signal first. A SIGKILL first spares that, and
		// changes nothing on Docker, whose forced removal kills.
		_, _ = d.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
	}
	_, err := d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && removing.says(err) {
		// Another removal is under way: gone once the engine says so.
		return d.waitGone(ctx, id, label)
	}
	return classify("remove container "+label, err)
}

// podmanRemove removes container id through Podman's own API, forcefully,
// with its anonymous volumes and no stop timeout. done is false when that
// API could not be asked or refused the request as such (an older Podman):
// the caller then removes it through Docker's.
func (d *Driver) podmanRemove(ctx context.Context, id, label string) (done bool, err error) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return d.cli.Dialer()(ctx) },
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, "http://podman/v4.0.0/libpod/containers/"+url.PathEscape(id)+"?force=true&timeout=0&volumes=true", nil)
	if err != nil {
		return false, nil
	}
	resp, err := hc.Do(req)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		// Not sent (the socket refused the connection under load): ask
		// once more before the Docker API's way. A request sent whose
		// answer was lost is not asked again: it may have removed the
		// container, and a second one would say it was never there.
		resp, err = hc.Do(req.Clone(ctx))
	}
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch {
	case resp.StatusCode/100 == 2:
		return true, nil
	case resp.StatusCode == http.StatusNotFound:
		return true, fmt.Errorf("remove container %s: %w", label, backend.ErrNotFound)
	case resp.StatusCode == http.StatusInternalServerError:
		var m struct {
			Message string `json:"message"`
		}
		json.Unmarshal(body, &m)
		if err := errors.New(m.Message); removing.says(err) {
			// Another removal is under way: gone once the engine says so.
			return true, d.waitGone(ctx, id, label)
		}
		return true, classify("remove container "+label, errors.New(m.Message))
	}
	return false, nil
}

// waitGone waits, within ctx, until the engine no longer has container
// id; nil once it has not.
func (d *Driver) waitGone(ctx context.Context, id, label string) error {
	for {
		_, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err := classify("remove container "+label, err); errors.Is(err, backend.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return classify("remove container "+label+": its removal already under way did not finish", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// removeNetwork removes network id, which had attached containers when it
// was looked up. Docker refuses to remove a network with containers
// attached; Podman 4.3 refuses only when the network is named, and
// removes it from under them (which may not be the run's: a keep-alive
// sandbox that joined it) when given its id. Refused here, it is refused
// on both.
func (d *Driver) removeNetwork(ctx context.Context, id, label string, attached int) error {
	if attached > 0 {
		return fmt.Errorf("remove network %s: %w: %d container(s) attached", label, backend.ErrInUse, attached)
	}
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	_, err := d.cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
	return classify("remove network "+label, err)
}

// RemoveIDs removes containers or networks by the ids their creates gave
// back, without a lookup: the caller made them.
func (d *Driver) RemoveIDs(ctx context.Context, k backend.Kind, ids []string) []error {
	return forEach(ids, d.removeParallel(), func(id string) error { return d.removeID(ctx, k, id, shortID(id)) })
}

// ListRun returns the ids of the containers (all, running or not) or
// networks labelled with run runID under either spelling, keep-alive ones
// aside.
func (d *Driver) ListRun(ctx context.Context, k backend.Kind, runID string) ([]string, error) {
	found, err := d.findRun(ctx, k, runID, false)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(found))
	for _, f := range found {
		ids = append(ids, f.ID)
	}
	return ids, nil
}

// FindRun is ListRun with each one's name, in id order, and whether a
// container is on its way out (Found.Leaving).
func (d *Driver) FindRun(ctx context.Context, k backend.Kind, runID string) ([]backend.Found, error) {
	return d.findRun(ctx, k, runID, true)
}

// findRun is FindRun; without leaving, it asks nothing more than the
// list (what a watchdog's pass needs).
func (d *Driver) findRun(ctx context.Context, k backend.Kind, runID string, leaving bool) ([]backend.Found, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	if k == backend.VolumeKind || k == backend.ImageKind {
		return d.findHeld(ctx, k, runID)
	}
	var found []backend.Found
	add := func(f backend.Found, labels map[string]string) {
		if backend.NotOwnedWhy(runID, f.Name, labels) == "" && !slices.ContainsFunc(found, func(g backend.Found) bool { return g.ID == f.ID }) {
			found = append(found, f)
		}
	}
	for _, label := range []string{LabelRunID, LabelRunIDAlt} {
		f := client.Filters{}.Add("label", label+"="+runID)
		if k == backend.NetworkKind {
			nl, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
			if err != nil {
				return nil, classify("list networks", err)
			}
			for _, n := range nl.Items {
				add(backend.Found{ID: n.ID, Name: n.Name, Origin: origin.FromLabels(n.Labels)}, n.Labels)
			}
			continue
		}
		cl, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			return nil, classify("list containers", err)
		}
		for _, c := range cl.Items {
			name := ""
			if len(c.Names) > 0 {
				name = trimSlash(c.Names[0])
			}
			f := backend.Found{ID: c.ID, Name: name, Origin: origin.FromLabels(c.Labels)}
			if leaving {
				f.Leaving = d.leaving(ctx, c.ID, c.State)
			}
			add(f, c.Labels)
		}
	}
	slices.SortFunc(found, func(a, b backend.Found) int { return strings.Compare(a.ID, b.ID) })
	return found, nil
}

// leaving reports whether container id, in state, is on its way out: the
// engine is removing it, or it stopped and the engine removes it by itself
// (auto-remove). A stopped container is looked at once more to know.
func (d *Driver) leaving(ctx context.Context, id string, state container.ContainerState) bool {
	switch state {
	case container.StateRemoving:
		return true
	case container.StateExited, container.StateDead:
	default:
		return false
	}
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return errors.Is(classify("inspect container "+id, err), backend.ErrNotFound) // gone meanwhile
	}
	return res.Container.HostConfig != nil && res.Container.HostConfig.AutoRemove
}

// CloseRun removes every container, volume, network and image labelled
// with run id, whether or not the ledger lists them: what the end of a
// TestMain calls. It returns what it removed. A volume or image still in
// use is kept, and said.
func (d *Driver) CloseRun(ctx context.Context, runID string) (removed []string, err error) {
	var errs []error
	for _, k := range d.Kinds() {
		ids, err := d.ListRun(ctx, k, runID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, e := range d.RemoveIDs(ctx, k, ids) {
			switch {
			case e == nil:
				removed = append(removed, k.String()+" "+shortID(ids[i]))
			case !errors.Is(e, backend.ErrNotFound):
				errs = append(errs, e)
			}
		}
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("close run %s: %w", runID, errors.Join(errs...))
	}
	return removed, nil
}

// forEach calls fn for each of names, parallel at once, and returns the
// outcomes in names' order.
func forEach(names []string, parallel int, fn func(string) error) []error {
	errs := make([]error, len(names))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(n)
		}()
	}
	wg.Wait()
	return errs
}

func trimSlash(s string) string { return strings.TrimPrefix(s, "/") }
