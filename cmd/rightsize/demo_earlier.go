package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

// A demo killed outright (SIGKILL) cannot clean up after itself. Its cache
// dir is a ledger like any other, so the next demo does what the next test
// process would: it sweeps it. The dir is named after the demo's id, and
// holds the demo's own record to tell whether it still runs.
const (
	demoDirPrefix  = "rightsize-demo-"
	demoRecordFile = "demo.json"
)

// makeCacheDir creates the demo's cache dir, with its record.
func (d *demo) makeCacheDir() error {
	dir, err := os.MkdirTemp("", demoDirPrefix+d.id+"-")
	if err != nil {
		return err
	}
	d.cache = dir
	me, err := ledger.Self()
	if err != nil {
		return err
	}
	rec := ledger.Record{PID: me.PID, Backend: d.drv.Name(), Endpoint: d.drv.Endpoint(), StartTicks: me.StartTicks, BootID: me.BootID, PidNamespace: me.PidNamespace, Writer: "go"}
	if !me.Start.IsZero() {
		rec.StartedISO = ledger.FormatISO(me.Start)
	}
	return os.WriteFile(filepath.Join(dir, demoRecordFile), rec.Marshal(), 0o600)
}

// sweepEarlier removes what earlier demos, now dead, left: the sandboxes
// their ledgers list, anything else carrying their label, their cache dirs.
// It says what it did ("" for nothing).
func (d *demo) sweepEarlier(ctx context.Context) (string, error) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), demoDirPrefix+"*"))
	if err != nil {
		return "", err
	}
	var demos, containers, networks int
	for _, dir := range dirs {
		id, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), demoDirPrefix), "-")
		if !validDemoID(id) || id == d.id {
			continue
		}
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue // never follow a link planted in a shared folder
		}
		data, err := ledger.ReadFile(filepath.Join(dir, demoRecordFile), ledger.MaxRecordSize) // a FIFO planted there blocks nothing
		if err != nil {
			continue // not ours to judge (another user's, or being made)
		}
		rec, err := ledger.ParseRecord(data)
		if err != nil || ledger.Judge(rec).State != ledger.Dead || rec.Endpoint != d.drv.Endpoint() {
			continue // alive, or run against another engine: not this demo's to clean
		}
		rep, err := reaper.Sweep(ctx, d.drv, reaper.WithCacheDir(dir))
		if err != nil {
			return "", err
		}
		if !rep.Clean() || rep.Count(reaper.LeftAlone) > 0 {
			continue // something may still run: the dir keeps it listed
		}
		labels := []string{demoLabel + "=" + id}
		for _, rr := range rep.Runs {
			// A network carries only its run's labels.
			labels = append(labels, runLabel(rr.ID))
			for _, it := range rr.Removed {
				if it.Outcome != reaper.Removed {
					continue
				}
				if it.Kind == backend.NetworkKind {
					networks++
				} else {
					containers++
				}
			}
		}
		rctx, cancel := context.WithTimeout(ctx, goneTimeout)
		c, n, err := d.removeLabelled(rctx, labels, true)
		cancel()
		if err != nil {
			return "", err
		}
		containers, networks = containers+c, networks+n
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
		demos++
	}
	if demos == 0 {
		return "", nil
	}
	return fmt.Sprintf("%d killed %s had left %d %s and %d %s: removed, and %s",
		demos, plural(demos, "demo", "demos"), containers, plural(containers, "container", "containers"),
		networks, plural(networks, "network", "networks"), plural(demos, "its cache dir", "their cache dirs")), nil
}
