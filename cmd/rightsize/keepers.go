package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/keeper"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

// lsKeepersTable prints the engine-side keepers on the engine, when there
// are any: the runs whose lease a watchdog holds there (from this machine
// or another); on the kubernetes backend, the run Leases of its namespace.
// An engine that cannot be asked prints nothing: the keep-alive table
// above has said so.
func (c *cli) lsKeepersTable(w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), lsEngineTimeout)
	defer cancel()
	drv, err := openEngine(ctx)
	if err != nil {
		return nil
	}
	defer drv.Close()
	if _, ok := drv.(backend.ClaimLister); ok {
		fmt.Fprintln(w)
		rep := leasesOf(ctx, drv, time.Now())
		if rep.EngineError != "" {
			fmt.Fprintf(w, "run Leases not listed: %s\n", oneLine(rep.EngineError))
			return nil
		}
		return c.leasesTable(w, rep, time.Now())
	}
	rep := keepersOf(ctx, drv)
	if rep.EngineError != "" {
		if !rep.none {
			fmt.Fprintf(w, "\nkeepers not listed: %s\n", oneLine(rep.EngineError))
		}
		return nil
	}
	if len(rep.Keepers) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return c.keepersTable(w, drv, rep)
}

// keepersTable prints rep's keepers as a table, under its heading.
func (c *cli) keepersTable(w io.Writer, drv backend.Driver, rep keepersReport) error {
	fmt.Fprintf(w, "keepers (%s engine at %s):\n", termtext.Quote(rep.Backend), termtext.Quote(dash(rep.Endpoint)))
	t := &table{}
	t.row("RUN", "NAME", c.paint(sgrDefault, "STATE"), "LEASE", "AGE")
	now := time.Now()
	for _, k := range rep.Keepers {
		lease := "-"
		if k.LeaseSeconds > 0 {
			lease = (time.Duration(k.LeaseSeconds * float64(time.Second))).String()
		}
		colour := sgrYellow
		if k.State == "running" {
			colour = sgrGreen
		}
		t.row(termtext.Quote(k.Run), termtext.Quote(k.Name), c.paint(colour, k.State), lease, formatDuration(max(now.Sub(k.created), 0)))
	}
	return t.write(w)
}

// keeperRow is one engine-side keeper as `rightsize ls --keepers --json`
// prints it. The field names are part of the command's contract (see
// `rightsize help ls`): add, never rename.
type keeperRow struct {
	Run  string `json:"run"`
	Name string `json:"name"`
	ID   string `json:"id"`
	// State is the engine's word: running, exited, ...
	State string `json:"state"`
	// LeaseSeconds is its lease timeout (0 when its label does not say).
	LeaseSeconds float64 `json:"leaseSeconds"`
	CreatedISO   string  `json:"createdIso"`

	created time.Time
}

// keepersReport is `rightsize ls --keepers --json`. The field names are
// part of the command's contract (see `rightsize help ls`).
type keepersReport struct {
	// Backend and Endpoint are the engine's that was asked.
	Backend  string `json:"backend"`
	Endpoint string `json:"endpoint"`
	// EngineError says why no keeper could be listed ("" when they were).
	EngineError string      `json:"engineError"`
	Keepers     []keeperRow `json:"keepers"`

	none bool // the backend makes no keepers: not worth a line in ls
}

// keepersOf lists the keepers on drv's engine within ctx.
func keepersOf(ctx context.Context, drv backend.Driver) keepersReport {
	rep := keepersReport{Backend: drv.Name(), Endpoint: drv.Endpoint(), Keepers: []keeperRow{}}
	ke, ok := drv.(interface{ Client() *client.Client })
	if !ok {
		rep.EngineError, rep.none = fmt.Sprintf("the %s backend makes no engine-side keepers; the docker backend does, on Docker and Podman", drv.Name()), true
		return rep
	}
	ks, err := keeper.List(ctx, ke.Client())
	if err != nil {
		rep.EngineError = err.Error()
		return rep
	}
	for _, k := range ks {
		rep.Keepers = append(rep.Keepers, keeperRow{Run: k.RunID, Name: k.Name, ID: k.ID, State: k.State,
			LeaseSeconds: k.LeaseTimeout.Seconds(), CreatedISO: ledger.FormatISO(k.Created), created: k.Created})
	}
	return rep
}

// lsKeepers is `rightsize ls --keepers`: the keepers alone, as a table or
// as JSON. An engine that cannot be asked is said, and the command still
// exits 0, as ls does.
func (c *cli) lsKeepers(w io.Writer, asJSON bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), lsEngineTimeout)
	defer cancel()
	var rep keepersReport
	drv, err := openEngine(ctx)
	if err != nil {
		rep = keepersReport{EngineError: err.Error(), Keepers: []keeperRow{}}
	} else {
		defer drv.Close()
		rep = keepersOf(ctx, drv)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	switch {
	case rep.EngineError != "":
		fmt.Fprintf(w, "keepers not listed: %s\n", oneLine(rep.EngineError))
		return nil
	case len(rep.Keepers) == 0:
		fmt.Fprintf(w, "no keepers on the %s engine at %s\n", termtext.Quote(rep.Backend), termtext.Quote(dash(rep.Endpoint)))
		return nil
	}
	return c.keepersTable(w, drv, rep)
}
