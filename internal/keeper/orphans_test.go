package keeper

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
)

// Orphans judges only runs whose containers, networks or volumes carry
// the kept mark, with no keeper running on the engine, once the youngest
// of them is older than the lease, and their keeper, if one
// stopped, stopped longer ago than its lease: a keeper stopped a moment
// ago is being started again by its holder. The marks here say an hour:
// no other sweep on this shared engine judges them meanwhile; the test's
// clock is moved instead.
func TestOrphans(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	with := func(run string, extra map[string]string) map[string]string {
		l := runLabels(run)
		maps.Copy(l, extra)
		return l
	}
	kept := map[string]string{docker.LabelKept: "1h0m0s"}
	orphan, held, plain, keepAlive, badMark := newRunID(t), newRunID(t), newRunID(t), newRunID(t), newRunID(t)
	r.container("", with(orphan, kept))
	r.container("", with(orphan, kept))
	r.container("", with(held, kept))
	r.start(held, Options{LeaseTimeout: time.Hour})
	r.container("", runLabels(plain))
	r.container("", map[string]string{docker.LabelReuse: "x", docker.LabelKept: "1h0m0s"})
	r.container("", with(keepAlive, map[string]string{docker.LabelReuse: "x", docker.LabelKept: "1h0m0s"}))
	r.container("", with(badMark, map[string]string{docker.LabelKept: "forever"}))
	// Marks of a second, under a keeper of an hour, which is stopped. The
	// keeper comes first: a mark of a second with no keeper yet is an
	// orphan two seconds on, and a sweep of another package's test on
	// this engine removed it while a loaded machine was starting the
	// keeper (seen once in CI).
	restarting := newRunID(t)
	stopped := r.start(restarting, Options{LeaseTimeout: time.Hour})
	r.container("", with(restarting, map[string]string{docker.LabelKept: "1s"}))
	if _, err := r.cli.ContainerStop(ctx, stopped.ID, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	// A keeper of an hour, stopped, whose run has nothing marked.
	lone := newRunID(t)
	loneKeeper := r.start(lone, Options{LeaseTimeout: time.Hour})
	if _, err := r.cli.ContainerStop(ctx, loneKeeper.ID, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	// A keeper its starter created and never started (killed between
	// the two, or the engine went away before the start): a sign of life
	// only while a start could still follow.
	unstarted := newRunID(t)
	created, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: NamePrefix + unstarted,
		Config: &container.Config{Image: r.img, Cmd: []string{"sleep", "3600"},
			Labels: map[string]string{testLabel: r.id, LabelKeeper: unstarted, LabelLease: "1h0m0s"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// A run whose only trace is a marked network (its removal was
	// refused while a container of the run was still going; the run's
	// containers and stopped keeper were removed after), and a run with
	// a marked container and network both.
	netOnly, both := newRunID(t), newRunID(t)
	netOnlyID := r.network("rz-net-"+netOnly, with(netOnly, kept))
	r.container("", with(both, kept))
	bothNet := r.network("rz-net-"+both, with(both, kept))
	// The same of a volume; and a keep-alive's network, never judged.
	volOnly := newRunID(t)
	vol := "rz-vol-" + volOnly
	if _, err := r.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Labels: with(volOnly, map[string]string{testLabel: r.id, docker.LabelKept: "1h0m0s"})}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cli.VolumeRemove(context.Background(), vol, client.VolumeRemoveOptions{Force: true}) })
	r.network("rz-net-"+keepAlive, with(keepAlive, map[string]string{docker.LabelReuse: "x", docker.LabelKept: "1h0m0s"}))
	ours := []string{orphan, held, plain, keepAlive, badMark, restarting, lone, unstarted, netOnly, both, volOnly}

	judged := func(now time.Time) map[string]int {
		t.Helper()
		found, err := Orphans(ctx, r.cli, now)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, o := range found {
			if slices.Contains(ours, o.RunID) {
				got[o.RunID] = len(o.Containers)
				if o.LeaseTimeout != time.Hour {
					t.Errorf("run %s: lease %s, want 1h", o.RunID, o.LeaseTimeout)
				}
			}
		}
		return got
	}
	if got := judged(time.Now()); len(got) != 0 {
		t.Errorf("now: judged %v; every run is younger than its lease", got)
	}
	// The run whose keeper stopped: its container is older than its mark
	// of a second, its keeper stopped less than the keeper's hour ago.
	if got := judged(time.Now().Add(30 * time.Minute)); len(got) != 0 {
		t.Errorf("half an hour on: judged %v; run %s's keeper stopped less than its lease ago", got, restarting)
	}
	found, err := Orphans(ctx, r.cli, time.Now().Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, o := range found {
		if slices.Contains(ours, o.RunID) {
			got[o.RunID] = len(o.Containers)
			if o.LeaseTimeout != time.Hour {
				t.Errorf("run %s: lease %s, want 1h", o.RunID, o.LeaseTimeout)
			}
		}
		if o.RunID == unstarted {
			if len(o.Keepers) != 1 || o.Keepers[0].ID != created.ID {
				t.Errorf("run %s: keepers %v, want its keeper %s, never started", o.RunID, o.Keepers, created.ID)
			}
			if err := RemoveStopped(ctx, r.cli, o); err != nil {
				t.Fatal(err)
			}
			if r.exists(created.ID, false) {
				t.Errorf("RemoveStopped left the keeper %s, never started", NamePrefix+unstarted)
			}
		}
		if o.RunID == netOnly && (len(o.Networks) != 1 || o.Networks[0].ID != netOnlyID || o.Networks[0].Name != "rz-net-"+netOnly) {
			t.Errorf("run %s: networks %v, want its network %s", o.RunID, o.Networks, netOnlyID)
		}
		if o.RunID == volOnly && (len(o.Volumes) != 1 || o.Volumes[0].Name != vol || len(o.Networks) != 0) {
			t.Errorf("run %s: volumes %v, networks %v; want its volume %s alone", o.RunID, o.Volumes, o.Networks, vol)
		}
		if o.RunID == both && (len(o.Networks) != 1 || o.Networks[0].ID != bothNet) {
			t.Errorf("run %s: networks %v, want its network %s", o.RunID, o.Networks, bothNet)
		}
		if o.RunID == lone && (len(o.Keepers) != 1 || o.Keepers[0].ID != loneKeeper.ID) {
			t.Errorf("run %s: stopped keepers %v, want its keeper %s", o.RunID, o.Keepers, loneKeeper.ID)
		}
		if o.RunID == restarting {
			if len(o.Keepers) != 1 || o.Keepers[0].ID != stopped.ID {
				t.Errorf("run %s: stopped keepers %v, want its keeper %s", o.RunID, o.Keepers, stopped.ID)
			}
			if err := RemoveStopped(ctx, r.cli, o); err != nil {
				t.Fatal(err)
			}
			if r.exists(stopped.ID, false) {
				t.Errorf("RemoveStopped left the stopped keeper %s", stopped.Name)
			}
		}
	}
	if want := map[string]int{orphan: 2, restarting: 1, lone: 0, unstarted: 0, netOnly: 0, both: 1, volOnly: 0}; !maps.Equal(got, want) {
		t.Errorf("two hours on: judged %v, want %v (held %s, plain %s, keep-alive %s, bad mark %s)", got, want, held, plain, keepAlive, badMark)
	}
}
