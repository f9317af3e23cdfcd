package keeper

import (
	"context"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/proctest"
)

// The first sandbox's extra cost on an engine with a keeper, once the
// image is cached there: the image found, the keeper started and proven
// to reach its engine, its lease held. The keeper's end (Close, then gone)
// is outside the timing.
//
//	flock /tmp/rz-engine.lock go test -run '^$' -bench BenchmarkFirstKeeper -benchtime 20x ./internal/keeper/
func BenchmarkFirstKeeper(b *testing.B) {
	r := newRig(b)
	ctx := context.Background()
	if _, err := Ensure(ctx, r.cli); err != nil {
		b.Fatal(err)
	}
	var ensure, start, hold time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := Ensure(ctx, r.cli); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		k, err := Start(ctx, r.cli, newRunID(b), Options{})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		l, err := k.Hold(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		ensure, start, hold = ensure+t1.Sub(t0), start+t2.Sub(t1), hold+t3.Sub(t2)

		b.StopTimer()
		l.Close()
		r.keeperGone(time.Minute, k.Name)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(ensure.Milliseconds())/n, "ensure-ms/op")
	b.ReportMetric(float64(start.Milliseconds())/n, "start-ms/op")
	b.ReportMetric(float64(hold.Milliseconds())/n, "hold-ms/op")
}

// From the lease's close to the run's 3 containers and 1 network gone from
// the engine's list (polled every 5 ms).
//
//	flock /tmp/rz-engine.lock go test -run '^$' -bench BenchmarkCloseToGone -benchtime 10x ./internal/keeper/
func BenchmarkCloseToGone(b *testing.B) {
	r := newRig(b)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		run := newRunID(b)
		k, err := Start(ctx, r.cli, run, Options{LeaseTimeout: 5 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		l, err := k.Hold(ctx)
		if err != nil {
			b.Fatal(err)
		}
		net := r.network("rz-net-"+run, runLabels(run))
		ctrs := []string{r.container("rz-"+run+"-1", runLabels(run), net), r.container("rz-"+run+"-2", runLabels(run)), r.container("rz-"+run+"-3", runLabels(run))}
		b.StartTimer()
		l.Close()
		r.allGone(time.Minute, "the run's containers and network", ctrs, []string{net})
		b.StopTimer()
		r.keeperGone(time.Minute, k.Name)
		b.StartTimer()
	}
}

// The keeper's resident memory while it holds a lease, as the host sees
// its process (VmRSS), reported as KiB.
//
//	flock /tmp/rz-engine.lock go test -run '^$' -bench BenchmarkKeeperMemory -benchtime 5x ./internal/keeper/
func BenchmarkKeeperMemory(b *testing.B) {
	proctest.NeedHostPidNamespace(b)
	r := newRig(b)
	ctx := context.Background()
	var total, most int
	for b.Loop() {
		k, err := Start(ctx, r.cli, newRunID(b), Options{})
		if err != nil {
			b.Fatal(err)
		}
		l, err := k.Hold(ctx)
		if err != nil {
			b.Fatal(err)
		}
		// A few heartbeats in: the keeper as it waits.
		time.Sleep(3 * heartbeatEvery(k.LeaseTimeout))
		res, err := r.cli.ContainerInspect(ctx, k.ID, client.ContainerInspectOptions{})
		if err != nil {
			b.Fatal(err)
		}
		kib, err := proctest.VmRSSKiB(res.Container.State.Pid)
		if err != nil {
			b.Fatal(err)
		}
		total += kib
		most = max(most, kib)
		l.Close()
		r.keeperGone(time.Minute, k.Name)
	}
	b.ReportMetric(float64(total)/float64(b.N), "rss-KiB")
	b.ReportMetric(float64(most), "max-rss-KiB")
}

// The floor of Start: what the engine takes to create and start a bare
// container as the keeper is made (no network, auto-removed), waited for
// until it runs, and nothing else.
//
//	flock /tmp/rz-engine.lock go test -run '^$' -bench BenchmarkContainerFloor -benchtime 20x ./internal/keeper/
func BenchmarkContainerFloor(b *testing.B) {
	r := newRig(b)
	ctx := context.Background()
	for b.Loop() {
		res, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config:     &container.Config{Image: r.img, Cmd: []string{"sleep", "3600"}, Labels: map[string]string{testLabel: r.id}},
			HostConfig: &container.HostConfig{AutoRemove: true, NetworkMode: "none"},
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := r.cli.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !gone(err) {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
