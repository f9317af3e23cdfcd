//go:build linux

package reaper_test

import (
	"context"
	"slices"
	"testing"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

// createNetwork creates a bridge network named name with labels, whatever
// other network has that name (Docker allows several), and removes it by
// its id when the test ends.
func createNetwork(t *testing.T, d *docker.Driver, name string, labels map[string]string) {
	t.Helper()
	res, err := d.Client().NetworkCreate(context.Background(), name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels})
	if err != nil && networksNamed(t, d, name) > 0 {
		t.Skipf("this engine refuses a second network named %s (Podman does), so never has a name to settle: %v", name, err)
	}
	if err != nil {
		t.Fatalf("create network %s: %v", name, err)
	}
	t.Cleanup(func() { _, _ = d.Client().NetworkRemove(context.Background(), res.ID, client.NetworkRemoveOptions{}) })
}

// networksNamed counts the networks named exactly name.
func networksNamed(t *testing.T, d *docker.Driver, name string) int {
	t.Helper()
	nl, err := d.Client().NetworkList(context.Background(), client.NetworkListOptions{Filters: client.Filters{}.Add("name", name)})
	must(t, err)
	n := 0
	for _, it := range nl.Items {
		if it.Name == name {
			n++
		}
	}
	return n
}

// A dead run whose watchdog died too lists a name two of its networks
// share, which a stranger's network has as well, and a network still in
// use. The sweep removes the run's two by their label and leaves the
// stranger's, even while it keeps the one in use; once that one is free,
// the next sweep reaps the run. (Before, the name was "ambiguous" to
// every sweep, and kept for ever.)
func TestSweepSameNamedNetworks(t *testing.T) {
	d := openDocker(t)
	ctx := context.Background()
	run := randHex(t, 8)
	ours := map[string]string{labelTest: "reaper", docker.LabelRunID: run, docker.LabelRunIDAlt: run}
	dup, busy := uniqueName(t, "dup"), uniqueName(t, "busy")
	createNetwork(t, d, dup, ours)
	createNetwork(t, d, dup, ours)
	createNetwork(t, d, dup, map[string]string{labelTest: "stranger"})
	createNetwork(t, d, busy, ours)
	member := uniqueName(t, "member")
	startContainer(t, d, member, busy, "")

	cache := t.TempDir()
	runs := runsDir(t, cache)
	writeRun(t, runs, run, recordOf(deadProcess(t), backend.Docker, d.Endpoint()).Marshal(), nil, []string{dup, busy})
	rep, err := reaper.Sweep(ctx, d, reaper.WithCacheDir(cache))
	must(t, err)
	rr := only(t, rep)
	if rr.Decision != reaper.Kept {
		t.Errorf("decision %q, want kept (a network in use)", rr.Decision)
	}
	if !slices.EqualFunc(rr.Kept, []string{busy}, func(it reaper.Item, n string) bool { return it.Name == n }) {
		t.Errorf("kept %v, want %s alone", rr.Kept, busy)
	}
	if !slices.EqualFunc(rr.NotOwned, []string{dup}, func(it reaper.Item, n string) bool { return it.Name == n }) {
		t.Errorf("not the run's: %v, want %s (the stranger's network of that name)", rr.NotOwned, dup)
	}
	if n := networksNamed(t, d, dup); n != 1 {
		t.Errorf("%d networks named %s left, want the stranger's alone", n, dup)
	}
	_, _, nets := ledger.Paths(runs, run)
	assertFile(t, nets, busy+"\n")

	removeContainer(t, d, member)
	rep, err = reaper.Sweep(ctx, d, reaper.WithCacheDir(cache))
	must(t, err)
	if rr := only(t, rep); rr.Decision != reaper.Reaped {
		t.Errorf("the sweep after: %q (%v), want reaped", rr.Decision, rr.Kept)
	}
	if networksNamed(t, d, busy) != 0 {
		t.Errorf("%s is still there", busy)
	}
}
