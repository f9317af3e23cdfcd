package keeper

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
)

// Orphan is a run whose keeper is gone from the engine: its containers
// carry docker.LabelKept (they were made while a keeper held its lease),
// no keeper of the run is on the engine, and the youngest of them is older
// than the lease timeout they carry. Whoever held that lease is dead: a
// live holder's keeper is there until the holder lets go.
type Orphan struct {
	RunID string
	// LeaseTimeout is the longest of the containers' LabelKept values.
	LeaseTimeout time.Duration
	// Containers are the run's marked containers.
	Containers []Found
}

// Found is a container of an orphaned run.
type Found struct{ ID, Name string }

// Orphans returns the runs on the engine cli talks to whose keeper is
// gone, as of now, in run id order. A run whose containers carry no
// docker.LabelKept (another member's, a Go run that had no keeper) is
// never among them; nor is a run with a keeper on the engine in any state
// but exited or dead, nor one whose mark is not a lease timeout.
func Orphans(ctx context.Context, cli *client.Client, now time.Time) ([]Orphan, error) {
	lctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := cli.ContainerList(lctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", docker.LabelKept)})
	if err != nil {
		return nil, fmt.Errorf("keeper: listing what keepers kept: %w", err)
	}
	if len(res.Items) == 0 {
		return nil, nil // the usual answer: one call
	}
	// Listed after what they keep: a keeper that is there for a
	// container seen above is seen here.
	keepers, err := List(ctx, cli)
	if err != nil {
		return nil, err
	}
	present := map[string]bool{}
	for _, k := range keepers {
		if k.State != "exited" && k.State != "dead" {
			present[k.RunID] = true
		}
	}
	runs := map[string]*Orphan{}
	young := map[string]bool{}
	for _, c := range res.Items {
		run := c.Labels[docker.LabelRunID]
		if run == "" {
			run = c.Labels[docker.LabelRunIDAlt]
		}
		lease, err := time.ParseDuration(c.Labels[docker.LabelKept])
		if !ledger.ValidRunID(run) || err != nil || checkLeaseTimeout(lease) != nil || c.Labels[LabelKeeper] != "" || c.Labels[docker.LabelReuse] != "" {
			continue
		}
		o := runs[run]
		if o == nil {
			o = &Orphan{RunID: run}
			runs[run] = o
		}
		o.LeaseTimeout = max(o.LeaseTimeout, lease)
		// The engine gives the creation to the second: a second more
		// never judges a run early.
		if now.Sub(time.Unix(c.Created, 0)) <= lease+time.Second {
			young[run] = true
		}
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		o.Containers = append(o.Containers, Found{ID: c.ID, Name: name})
	}
	var out []Orphan
	for run, o := range runs {
		if present[run] || young[run] {
			continue
		}
		out = append(out, *o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunID < out[j].RunID })
	return out, nil
}
