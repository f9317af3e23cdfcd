//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// sweep times reaper.Sweep through the docker driver over an empty
// ledger, and over k dead runs (a pid no process has), each listing one
// sandbox that is already gone, or none.
func (b *bench) sweep(ctx context.Context, ks []int, reps int) error {
	drv, err := docker.Open(ctx)
	if err != nil {
		return err
	}
	defer drv.Close()
	// A pid that was just freed: its records are dead ("no process has pid
	// N", or, if it is reused meanwhile, another start time).
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		return err
	}
	dead := c.Process.Pid
	me, err := ledger.Self()
	if err != nil {
		return err
	}
	rec := ledger.Record{PID: dead, StartedISO: ledger.FormatISO(time.Now().Add(-time.Minute)), Backend: "docker",
		BootID: me.BootID, PidNamespace: me.PidNamespace, Endpoint: drv.Endpoint(), Writer: "go"}.Marshal()
	type shape struct {
		k         int
		sandboxes bool
	}
	shapes := []shape{{0, false}}
	for _, k := range ks {
		if k > 0 {
			shapes = append(shapes, shape{k, true}, shape{k, false})
		}
	}
	for _, s := range shapes {
		var ds []time.Duration
		for range reps {
			dir, err := os.MkdirTemp("", "rz-bench-sweep-")
			if err != nil {
				return err
			}
			for j := range s.k {
				id := fmt.Sprintf("%08x", j)
				var sbx []string
				if s.sandboxes {
					sbx = []string{"rz-" + id + "-1"}
				}
				if err := harness.WriteRun(dir, id, rec, sbx, nil); err != nil {
					return err
				}
			}
			start := time.Now()
			rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(dir))
			d := time.Since(start)
			os.RemoveAll(dir)
			if err != nil {
				return err
			}
			if got := rep.Count(reaper.Reaped); got != s.k {
				return fmt.Errorf("sweep of %d dead runs reaped %d", s.k, got)
			}
			ds = append(ds, d)
		}
		what := "an empty ledger"
		switch {
		case s.k > 0 && s.sandboxes:
			what = fmt.Sprintf("%d dead runs, 1 sandbox each (already gone: the engine answers not found)", s.k)
		case s.k > 0:
			what = fmt.Sprintf("%d dead runs, no sandbox listed", s.k)
		}
		per := ""
		if s.k > 0 {
			per = fmt.Sprintf(" (%s a run)", time.Duration(int64(harness.Median(ds))/int64(s.k)).Round(time.Microsecond))
		}
		fmt.Printf("sweep %s: reps=%d median=%s p95=%s%s\n", what, len(ds), harness.Median(ds).Round(time.Microsecond), harness.P95(ds).Round(time.Microsecond), per)
	}
	return nil
}
