package keeper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

func hold(t *testing.T, k *Keeper) *Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := k.Hold(ctx)
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// The lease's end by EOF: the holder closes its connection; the run's
// containers (under either spelling of the label) and its network go,
// then the keeper. The lease timeout is long: only the EOF can end it
// within the test's wait.
func TestCloseRemovesTheRun(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	k := r.start(run, Options{LeaseTimeout: 5 * time.Minute})
	lease := hold(t, k)

	net := r.network("rz-net-"+run, runLabels(run))
	ctrs := []string{
		r.container("rz-"+run+"-1", runLabels(run), net),
		r.container("rz-"+run+"-2", map[string]string{docker.LabelRunID: run}),
		r.container("rz-"+run+"-3", map[string]string{docker.LabelRunIDAlt: run}),
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("the lease ended while held: %v", err)
	}
	for _, id := range ctrs {
		if !r.exists(id, false) {
			t.Fatalf("container %s went while the lease was held", id[:12])
		}
	}
	closed := time.Now()
	if err := lease.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	took := r.allGone(time.Minute, "the run's 3 containers and its network to be gone", ctrs, []string{net})
	r.keeperGone(time.Minute, k.Name)
	t.Logf("close → the run's 3 containers and 1 network gone: %s; the keeper gone: %s (it looks again %s after its first removals)",
		took.Round(time.Millisecond), time.Since(closed).Round(time.Millisecond), DefaultSettle)
	if !errors.Is(lease.Err(), ErrClosed) {
		t.Errorf("the closed lease's Err is %v, want ErrClosed", lease.Err())
	}
}

// A keeper removes its own run's containers and networks only: not
// another run's, not a keep-alive sandbox even when it carries the run's
// label, not a container without the label whatever its name, not a
// network a container of others still uses (until that container is
// gone); and another run's keeper and lease go on.
func TestOnlyItsRun(t *testing.T) {
	r := newRig(t)
	runA, runB := newRunID(t), newRunID(t)
	ka := r.start(runA, Options{Settle: -1})
	kb := r.start(runB, Options{})
	leaseA, leaseB := hold(t, ka), hold(t, kb)

	netA := r.network("rz-net-"+runA, runLabels(runA))
	netB := r.network("rz-net-"+runB, runLabels(runB))
	mineA := r.container("rz-"+runA+"-1", runLabels(runA), netA)
	keepAlive := map[string]string{docker.LabelReuse: "0123456789ab"}
	for k, v := range runLabels(runA) {
		keepAlive[k] = v
	}
	// A keep-alive sandbox that joined run A's network: the network stays
	// while it is attached.
	attached := r.container("rz-reuse-"+runA+"0000", keepAlive, netA)
	left := map[string]string{
		"run B's container": r.container("rz-"+runB+"-1", runLabels(runB), netB),
		"a keep-alive by its label": r.container("", map[string]string{
			docker.LabelReuseExtra: "x", docker.LabelRunID: runA}),
		"a keep-alive by its name": r.container("rz-reuse-"+runA+"1111", runLabels(runA)),
		"an unlabelled container":  r.container("rz-"+runA+"-9", nil),
		"another run's label value": r.container("", map[string]string{
			docker.LabelRunID: runA + "0"}),
		"the keep-alive on A's network": attached,
	}

	if err := leaseA.Close(); err != nil {
		t.Fatal(err)
	}
	r.allGone(time.Minute, "run A's own container", []string{mineA}, nil)
	// The keeper is retrying the network it could not remove; by then it
	// has been through every container it would ever remove.
	proctest.WaitUntil(t, time.Minute, "keeper A to have tried its network", func() bool {
		return strings.Contains(r.logs(ka.ID), "left for now: network rz-net-"+runA)
	})
	for what, id := range left {
		if !r.exists(id, false) {
			t.Errorf("%s (%s) was removed by run A's keeper", what, id[:12])
		}
	}
	if !r.exists(netA, true) {
		t.Error("run A's network was removed from under a keep-alive container of others")
	}
	if !r.exists(netB, true) {
		t.Error("run B's network was removed by run A's keeper")
	}
	if err := leaseB.Err(); err != nil {
		t.Errorf("run B's lease ended with run A's: %v", err)
	}

	// Once what held it is gone, the network goes at the keeper's next try.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.cli.ContainerRemove(ctx, attached, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	r.allGone(time.Minute, "run A's network, once its last container was gone", nil, []string{netA})
	r.keeperGone(time.Minute, ka.Name)
	if !r.exists(kb.ID, false) {
		t.Error("run B's keeper went with run A's")
	}
	if err := leaseB.Err(); err != nil {
		t.Errorf("run B's lease ended with run A's: %v", err)
	}
}

// A keeper nobody holds ends as one whose holder died: the run's
// containers go after its wait for a first holder. The container is made
// first: one made after a short wait had ended would stay.
func TestNobodyHolds(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	c := r.container("rz-"+run+"-1", runLabels(run))
	k := r.start(run, Options{LeaseTimeout: time.Second, FirstHold: 2 * time.Second, Settle: -1})
	r.allGone(time.Minute, "the run's container, with nobody holding the lease", []string{c}, nil)
	r.keeperGone(time.Minute, k.Name)
}

// A first holder that comes after the lease timeout, within the first
// hold's wait, takes the lease: an engine under load may take longer to
// start the holder's exec than a short lease lasts (CI saw 11 s for a
// container's start, against a 2 s lease). The run's container stays.
func TestFirstHolderAfterTheLeaseTimeout(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	c := r.container("rz-"+run+"-1", runLabels(run))
	k := r.start(run, Options{LeaseTimeout: time.Second, FirstHold: time.Minute, Settle: -1})
	// The holder is late: three lease timeouts.
	time.Sleep(3 * time.Second)
	lease := hold(t, k)
	if !r.exists(c, false) {
		t.Fatalf("the run's container went before its late first holder came")
	}
	if err := lease.Close(); err != nil {
		t.Fatal(err)
	}
	r.allGone(time.Minute, "the run's container, once its late holder let go", []string{c}, nil)
	r.keeperGone(time.Minute, k.Name)
}

// A signal to the keeper (docker stop, an engine shutting down) removes
// nothing, itself included: it stays, stopped, the run's sign of life for
// a sweep, and its holder hears of the end. Revive starts it again, its
// lease is held again, and its end then removes the run as ever.
func TestStopRemovesNothing(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	k := r.start(run, Options{})
	lease := hold(t, k)
	c := r.container("rz-"+run+"-1", runLabels(run))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.cli.ContainerStop(ctx, k.ID, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-time.After(time.Minute):
		t.Fatal("the lease did not end with its keeper")
	}
	if !errors.Is(lease.Err(), ErrKeeperGone) {
		t.Errorf("the lease's Err is %v, want ErrKeeperGone", lease.Err())
	}
	exists, running := r.state(k.ID)
	if !exists || running {
		t.Fatalf("the stopped keeper: exists %v, running %v; want it there, stopped\n%s", exists, running, r.logs(k.ID))
	}
	if !r.exists(c, false) {
		t.Fatal("a stopped keeper removed the run's container")
	}

	id, err := Revive(ctx, r.cli, run, Options{Secret: k.Secret})
	if err != nil || id != k.ID {
		t.Fatalf("Revive: %q, %v; want the stopped keeper %s started again", id, err, k.ID)
	}
	again, err := Hold(ctx, r.cli, id, k.Secret)
	if err != nil {
		t.Fatalf("Hold of the keeper started again: %v\n%s", err, r.logs(k.ID))
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	r.allGone(time.Minute, "the run's container, once the lease held again was let go", []string{c}, nil)
	r.keeperGone(time.Minute, k.Name)
}

// Revive of a keeper that is gone starts it anew, with the run's secret.
func TestReviveGone(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	k := r.start(run, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := k.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := Revive(ctx, r.cli, run, Options{Secret: k.Secret})
	if err != nil {
		t.Fatalf("Revive of a keeper that is gone: %v", err)
	}
	t.Cleanup(func() { (&Keeper{ID: id, Name: k.Name, cli: r.cli}).Remove(context.Background()) })
	if id == k.ID {
		t.Fatalf("Revive gave the removed keeper's id %s", id)
	}
	l, err := Hold(ctx, r.cli, id, k.Secret)
	if err != nil {
		t.Fatalf("Hold of the keeper started anew, with the run's secret: %v\n%s", err, r.logs(id))
	}
	l.Close()
	r.keeperGone(time.Minute, k.Name)
}

// A second holder, with the secret, while one holds the lease, is
// refused and changes nothing: the first holds it on.
func TestSecondHolderIsRefused(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	const timeout = 2 * time.Second
	k := r.start(run, Options{LeaseTimeout: timeout})
	first := hold(t, k)
	c := r.container("rz-"+run+"-1", runLabels(run))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if second, err := k.Hold(ctx); !errors.Is(err, ErrRefusedHolder) {
		if second != nil {
			second.Close()
		}
		t.Fatalf("a second Hold while the lease is held: %v, want ErrRefusedHolder", err)
	}
	if _, err := Hold(ctx, r.cli, k.ID, strings.Repeat("0", 64)); !errors.Is(err, ErrRefusedHolder) {
		t.Fatalf("a Hold with another secret: %v, want ErrRefusedHolder", err)
	}
	// An absence, over two lease timeouts of heartbeats.
	time.Sleep(2 * timeout)
	if err := first.Err(); err != nil {
		t.Fatalf("the first lease ended: %v\n%s", err, r.logs(k.ID))
	}
	if !r.exists(c, false) {
		t.Fatalf("the run's container went while its lease was held\n%s", r.logs(k.ID))
	}
	first.Close()
	r.allGone(time.Minute, "the run's container", []string{c}, nil)
	r.keeperGone(time.Minute, k.Name)
	if _, err := Hold(ctx, r.cli, k.Name, k.Secret); !errors.Is(err, ErrNotKeeper) {
		t.Errorf("Hold of a keeper that has ended: %v, want ErrNotKeeper", err)
	}
}

// Hold refuses what is not a running keeper.
func TestHoldRefusesOthers(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	plain := r.container("rz-"+run+"-1", runLabels(run))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ref := range []string{plain, NamePrefix + newRunID(t)} {
		if l, err := Hold(ctx, r.cli, ref, strings.Repeat("0", 64)); !errors.Is(err, ErrNotKeeper) {
			if l != nil {
				l.Close()
			}
			t.Errorf("Hold(%s): %v, want ErrNotKeeper", ref, err)
		}
	}
	if !r.exists(plain, false) {
		t.Error("Hold of a plain container removed it")
	}
}
