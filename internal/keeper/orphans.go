package keeper

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
)

// Orphan is a run whose keeper is gone from the engine: its containers,
// networks or volumes carry docker.LabelKept (they were made while a keeper held its
// lease), no keeper of the run runs on the engine, none stopped within the
// lease timeout, and the youngest of them is older than the lease timeout
// they carry. Whoever held that lease is dead: a live holder's keeper is
// there, or stopped a moment ago and being started again, until the
// holder lets go.
type Orphan struct {
	RunID string
	// LeaseTimeout is the longest of the marks' LabelKept values (and of its stopped keepers' lease).
	LeaseTimeout time.Duration
	// Containers are the run's marked containers.
	Containers []Found
	// Networks are the run's marked networks; Volumes its marked volumes
	// (a volume's ID is its name).
	Networks, Volumes []Found
	// Keepers are the run's keepers that stopped long ago, to remove once
	// the run is (RemoveStopped).
	Keepers []Found
}

// Found is a container, network or volume of an orphaned run.
type Found struct{ ID, Name string }

// Orphans returns the runs on the engine cli talks to whose keeper is
// gone, as of now, in run id order. A run whose containers, networks and
// volumes carry no docker.LabelKept (another member's, a Go run that had no keeper) is
// never among them; nor is a run with a keeper on the engine that runs
// (or is paused, restarting, or was created within two calls' time: a
// keeper created longer ago and never started counts as stopped when it
// was created), nor one whose keeper stopped
// within the lease timeout (the engine's answer of when), nor one whose
// mark is not a lease timeout. A keeper that stopped longer ago than its
// lease timeout, whose run has nothing marked left, is an Orphan with no
// Containers, Networks or Volumes: the keeper alone is to be removed.
func Orphans(ctx context.Context, cli *client.Client, now time.Time) ([]Orphan, error) {
	lctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	// A run's networks and volumes carry the mark too. One left alone
	// (its removal refused while a container of the run was still using
	// it, the run's containers and stopped keeper then removed) is the
	// run's last trace on the engine, and nothing else would bring it to
	// a sweep. Listed beside the containers: every sweep asks all three.
	marked := client.Filters{}.Add("label", docker.LabelKept)
	type listed struct {
		nets client.NetworkListResult
		vols client.VolumeListResult
		err  error
	}
	nch, vch := make(chan listed, 1), make(chan listed, 1)
	go func() {
		nl, err := cli.NetworkList(lctx, client.NetworkListOptions{Filters: marked})
		nch <- listed{nets: nl, err: err}
	}()
	go func() {
		vl, err := cli.VolumeList(lctx, client.VolumeListOptions{Filters: marked})
		vch <- listed{vols: vl, err: err}
	}()
	res, err := cli.ContainerList(lctx, client.ContainerListOptions{All: true, Filters: marked})
	if err != nil {
		cancel()
	}
	nets, vols := <-nch, <-vch
	if err != nil {
		return nil, fmt.Errorf("keeper: listing what keepers kept: %w", err)
	}
	if nets.err != nil {
		return nil, fmt.Errorf("keeper: listing the networks keepers kept: %w", nets.err)
	}
	if vols.err != nil {
		return nil, fmt.Errorf("keeper: listing the volumes keepers kept: %w", vols.err)
	}
	// Listed after what they keep: a keeper that is there for what was
	// seen above is seen here.
	keepers, err := List(ctx, cli)
	if err != nil {
		return nil, err
	}
	present := map[string]bool{}
	stopped := map[string][]Info{}
	for _, k := range keepers {
		switch {
		case k.State == "running", k.State == "paused", k.State == "restarting":
			present[k.RunID] = true
		case k.State == "created" && now.Sub(k.Created) <= 2*callTimeout+5*time.Second:
			// Its starter starts it within two calls' time (the
			// create's answer, the watchdog's start, the start), or
			// removes it; one created longer ago was never started (its
			// starter was killed between the two, or the engine went
			// away before the start), and counts as stopped at its
			// creation.
			present[k.RunID] = true
		default:
			stopped[k.RunID] = append(stopped[k.RunID], k)
		}
	}
	runs := map[string]*Orphan{}
	young := map[string]bool{}
	// mark takes one marked container, network or volume of a run,
	// created at created (zero: the engine did not say).
	mark := func(k backend.Kind, labels map[string]string, created time.Time, f Found) {
		run := labels[docker.LabelRunID]
		if run == "" {
			run = labels[docker.LabelRunIDAlt]
		}
		lease, err := time.ParseDuration(labels[docker.LabelKept])
		if !ledger.ValidRunID(run) || err != nil || checkLeaseTimeout(lease) != nil || labels[LabelKeeper] != "" || backend.NotOwnedWhy(run, f.Name, labels) != "" {
			return
		}
		o := runs[run]
		if o == nil {
			o = &Orphan{RunID: run}
			runs[run] = o
		}
		o.LeaseTimeout = max(o.LeaseTimeout, lease)
		// The engine gives a container's creation to the second: a
		// second more never judges a run early. A network or volume
		// whose creation it does not give cannot be judged old.
		if (k != backend.SandboxKind && created.IsZero()) || now.Sub(created) <= lease+time.Second {
			young[run] = true
		}
		switch k {
		case backend.NetworkKind:
			o.Networks = append(o.Networks, f)
		case backend.VolumeKind:
			o.Volumes = append(o.Volumes, f)
		default:
			o.Containers = append(o.Containers, f)
		}
	}
	for _, c := range res.Items {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		mark(backend.SandboxKind, c.Labels, time.Unix(c.Created, 0), Found{ID: c.ID, Name: name})
	}
	for _, n := range nets.nets.Items {
		mark(backend.NetworkKind, n.Labels, n.Created, Found{ID: n.ID, Name: n.Name})
	}
	for _, v := range vols.vols.Items {
		created, _ := time.Parse(time.RFC3339Nano, v.CreatedAt)
		mark(backend.VolumeKind, v.Labels, created, Found{ID: v.Name, Name: v.Name})
	}
	var out []Orphan
	for run, o := range runs {
		if present[run] || young[run] {
			continue
		}
		if ks := stopped[run]; len(ks) > 0 {
			// A keeper stopped (docker stop, an engine's restart) is
			// started again by its holder while the run lives: it is
			// the run's sign of life until a lease timeout after its
			// stop.
			for _, k := range ks {
				o.LeaseTimeout = max(o.LeaseTimeout, k.LeaseTimeout)
			}
			last, alive, err := lastStop(ctx, cli, ks)
			if err != nil || alive || now.Sub(last) <= o.LeaseTimeout+time.Second {
				continue // cannot tell, or not long enough: alive
			}
			for _, k := range ks {
				o.Keepers = append(o.Keepers, Found{ID: k.ID, Name: k.Name})
			}
		}
		out = append(out, *o)
	}
	// A keeper stopped long ago whose run has nothing marked left (a
	// sweep that removed the run's containers did not get to remove it,
	// or it was refused and its starter died): the keeper alone, to be
	// removed. Nothing else of its run is judged by it: a run that does
	// without a keeper creates what carries no mark.
	for run, ks := range stopped {
		if runs[run] != nil || present[run] {
			continue
		}
		o := Orphan{RunID: run}
		for _, k := range ks {
			lease := k.LeaseTimeout
			if checkLeaseTimeout(lease) != nil {
				lease = maxLeaseTimeout
			}
			o.LeaseTimeout = max(o.LeaseTimeout, lease)
			o.Keepers = append(o.Keepers, Found{ID: k.ID, Name: k.Name})
		}
		last, alive, err := lastStop(ctx, cli, ks)
		if err != nil || alive || now.Sub(last) <= o.LeaseTimeout+time.Second {
			continue
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunID < out[j].RunID })
	return out, nil
}

// lastStop is when the last of a run's stopped keepers stopped, as the
// engine says; alive when one of them runs again by now.
func lastStop(ctx context.Context, cli *client.Client, ks []Info) (last time.Time, alive bool, err error) {
	for _, k := range ks {
		ictx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := cli.ContainerInspect(ictx, k.ID, client.ContainerInspectOptions{})
		cancel()
		if errors.Is(docker.Classify("inspect", err), backend.ErrNotFound) {
			continue // gone since the list: no sign of life
		}
		if err != nil {
			return time.Time{}, false, err
		}
		st := res.Container.State
		if st == nil {
			return time.Time{}, false, fmt.Errorf("keeper %s: the engine gives no state", k.Name)
		}
		if st.Running || st.Paused || st.Restarting {
			return time.Time{}, true, nil
		}
		// The stop, else the start, else the creation: the latest the
		// engine knows of.
		t := k.Created
		for _, v := range []string{st.StartedAt, st.FinishedAt} {
			if at, err := time.Parse(time.RFC3339Nano, v); err == nil && at.After(t) && at.Year() > 1 {
				t = at
			}
		}
		if t.After(last) {
			last = t
		}
	}
	return last, false, nil
}

// RemoveStopped removes the stopped keepers of a run that Orphans found,
// once its run is reaped: a keeper started again since is left.
func RemoveStopped(ctx context.Context, cli *client.Client, o Orphan) error {
	var errs []error
	for _, f := range o.Keepers {
		ictx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := cli.ContainerInspect(ictx, f.ID, client.ContainerInspectOptions{})
		cancel()
		switch {
		case errors.Is(docker.Classify("inspect", err), backend.ErrNotFound):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("keeper %s: %w", f.Name, err))
			continue
		case res.Container.State != nil && (res.Container.State.Running || res.Container.State.Restarting):
			continue
		}
		k := &Keeper{ID: f.ID, Name: f.Name, cli: cli}
		if err := k.Remove(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
