package keeper

import (
	"context"
	"testing"
	"time"
)

// The lease's end by EOF: the holder closes its connection; the run's
// containers (under either spelling of the label) and its network go,
// then the keeper.
func TestCloseRemovesTheRun(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	k := r.start(run, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := k.Hold(ctx)
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	defer lease.Close()

	net := r.network("rz-net-"+run, runLabels(run))
	ctrs := []string{
		r.container("rz-"+run+"-1", runLabels(run), net),
		r.container("rz-"+run+"-2", map[string]string{"dev.rightsize.runId": run}),
		r.container("rz-"+run+"-3", map[string]string{"dev.rightsize.run_id": run}),
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("the lease ended while held: %v", err)
	}
	closed := time.Now()
	if err := lease.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	took := r.allGone(time.Minute, "the run's 3 containers and its network to be gone", ctrs, []string{net})
	gone := r.keeperGone(time.Minute, k.Name)
	t.Logf("close → the run's 3 containers and 1 network gone: %s; the keeper gone: %s (after its %s second look)", took.Round(time.Millisecond), time.Since(closed).Round(time.Millisecond), DefaultSettle)
	_ = gone
}
