package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/keeper"
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
	ke, ok := drv.(interface{ Client() *client.Client })
	if !ok {
		return nil
	}
	ks, err := keeper.List(ctx, ke.Client())
	if err != nil {
		fmt.Fprintf(w, "\nkeepers not listed: %s\n", oneLine(err.Error()))
		return nil
	}
	if len(ks) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nkeepers (%s engine at %s):\n", termtext.Quote(drv.Name()), termtext.Quote(dash(drv.Endpoint())))
	t := &table{}
	t.row("RUN", "NAME", c.paint(sgrDefault, "STATE"), "LEASE", "AGE")
	now := time.Now()
	for _, k := range ks {
		lease := "-"
		if k.LeaseTimeout > 0 {
			lease = k.LeaseTimeout.String()
		}
		colour := sgrYellow
		if k.State == "running" {
			colour = sgrGreen
		}
		t.row(termtext.Quote(k.RunID), termtext.Quote(k.Name), c.paint(colour, k.State), lease, formatDuration(max(now.Sub(k.Created), 0)))
	}
	return t.write(w)
}
