package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

// The run Leases are the kubernetes backend's claims (backend.ClaimLister):
// one a run, which its process and its watchdog renew, and which owns
// every pod and Service of the run. What each row says of a Lease is the
// backend's own judgement, the one its sweep acts on.

// leaseRow is one run Lease as `rightsize ls --leases --json` prints it.
// The field names are part of the command's contract (see `rightsize help
// ls`): add, never rename.
type leaseRow struct {
	Name string `json:"name"`
	// Run is the run it provably is; "" when it is not a run's.
	Run    string `json:"run"`
	Holder string `json:"holder"`
	// RenewedISO is its renewTime ("" when it says none), by the holder's
	// clock; ExpiresISO that plus its duration ("" when either is missing).
	RenewedISO      string `json:"renewedIso"`
	DurationSeconds int64  `json:"durationSeconds"`
	ExpiresISO      string `json:"expiresIso"`
	// Expired: that time is past, by this machine's clock.
	Expired bool `json:"expired"`
	// State is the sweep's judgement: held, lapsed, unjudged, not a run's.
	State  string `json:"state"`
	Reason string `json:"reason"`

	renewed time.Time
}

// leasesReport is `rightsize ls --leases --json`. The field names are
// part of the command's contract (see `rightsize help ls`).
type leasesReport struct {
	// Backend and Endpoint are the engine's that was asked ("" when none
	// answered); Namespace the kubernetes backend's.
	Backend   string `json:"backend"`
	Endpoint  string `json:"endpoint"`
	Namespace string `json:"namespace"`
	// EngineError says why no Lease could be listed ("" when they were).
	EngineError string     `json:"engineError"`
	Leases      []leaseRow `json:"leases"`
}

// errNoLeases is what a backend that keeps no run Leases says.
func errNoLeases(name string) string {
	return fmt.Sprintf("the %s backend keeps no run Leases; the kubernetes backend does (RIGHTSIZE_BACKEND=kubernetes)", name)
}

// leasesOf lists drv's run Leases, judged now, within ctx.
func leasesOf(ctx context.Context, drv backend.Driver, now time.Time) leasesReport {
	rep := leasesReport{Backend: drv.Name(), Endpoint: drv.Endpoint(), Leases: []leaseRow{}}
	if n, ok := drv.(interface{ Namespace() string }); ok {
		rep.Namespace = n.Namespace()
	}
	cl, ok := drv.(backend.ClaimLister)
	if !ok {
		rep.EngineError = errNoLeases(drv.Name())
		return rep
	}
	claims, err := cl.Claims(ctx, now)
	if err != nil {
		rep.EngineError = err.Error()
		return rep
	}
	for _, c := range claims {
		r := leaseRow{Name: c.Name, Run: c.Run, Holder: c.Holder, DurationSeconds: int64(c.Duration / time.Second),
			Expired: c.Lapsed, State: string(c.State), Reason: c.Reason, renewed: c.Renewed}
		if !c.Renewed.IsZero() {
			r.RenewedISO = ledger.FormatISO(c.Renewed)
		}
		if e := c.Expires(); !e.IsZero() {
			r.ExpiresISO = ledger.FormatISO(e)
		}
		rep.Leases = append(rep.Leases, r)
	}
	return rep
}

// gatherLeases opens the engine and lists its run Leases, for at most
// lsEngineTimeout.
func gatherLeases() leasesReport {
	ctx, cancel := context.WithTimeout(context.Background(), lsEngineTimeout)
	defer cancel()
	drv, err := openEngine(ctx)
	if err != nil {
		rep := leasesReport{Leases: []leaseRow{}, EngineError: err.Error()}
		if ctx.Err() != nil {
			rep.EngineError = fmt.Sprintf("no answer within %s (%v)", lsEngineTimeout, err)
		}
		return rep
	}
	defer drv.Close()
	return leasesOf(ctx, drv, time.Now())
}

// lsLeases is `rightsize ls --leases [--json]`: the run Leases alone. An
// engine that cannot be asked is said, never an error: ls works without
// one.
func (c *cli) lsLeases(w *bufio.Writer, asJSON bool) error {
	rep := gatherLeases()
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if rep.EngineError != "" {
		fmt.Fprintf(w, "run Leases not listed: %s\n", oneLine(rep.EngineError))
		return nil
	}
	return c.leasesTable(w, rep, time.Now())
}

// leasesTable prints rep's Leases: a line saying where they were looked
// for, then a table, or that there is none.
func (c *cli) leasesTable(w io.Writer, rep leasesReport, now time.Time) error {
	where := fmt.Sprintf("%s engine at %s", termtext.Quote(rep.Backend), termtext.Quote(dash(rep.Endpoint)))
	if len(rep.Leases) == 0 {
		fmt.Fprintf(w, "no run Leases (%s)\n", where)
		return nil
	}
	fmt.Fprintf(w, "run Leases (%s):\n", where)
	t := &table{}
	t.row("LEASE", "RUN", "HOLDER", "RENEWED", "LASTS", "EXPIRED", c.paint(sgrDefault, "STATE"), "REASON")
	for _, r := range rep.Leases {
		renewed, lasts, expired := "-", "-", "no"
		if !r.renewed.IsZero() {
			if d := now.Sub(r.renewed); d >= 0 {
				renewed = formatDuration(d) + " ago"
			} else {
				renewed = "in " + formatDuration(-d)
			}
		}
		if r.DurationSeconds > 0 {
			lasts = formatDuration(time.Duration(r.DurationSeconds) * time.Second)
		}
		if r.Expired {
			expired = "yes"
		} else if r.ExpiresISO == "" {
			expired = "-"
		}
		t.row(termtext.Quote(r.Name), termtext.Quote(dash(r.Run)), termtext.Quote(dash(r.Holder)), renewed, lasts, expired,
			c.paint(leaseColour(r.State), r.State), oneLine(r.Reason))
	}
	return t.write(w)
}

func leaseColour(state string) string {
	switch backend.ClaimState(state) {
	case backend.ClaimHeld:
		return sgrGreen
	case backend.ClaimLapsed:
		return sgrRed
	default:
		return sgrYellow
	}
}
