package docker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/backend"
)

// networksNamed lists the ids of the networks named exactly name.
func networksNamed(t *testing.T, d *Driver, name string) []string {
	t.Helper()
	nl, err := d.cli.NetworkList(context.Background(), client.NetworkListOptions{Filters: client.Filters{}.Add("name", name)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range nl.Items {
		if n.Name == name {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// A name several networks have (Docker allows it) is not a reason to keep
// it for ever: those of them that carry the run's label are removed, each
// by its id, and the rest are not the run's.
func TestRemoveSameNamedNetworks(t *testing.T) {
	d := openDriver(t)
	ctx := context.Background()
	run := "r" + strings.ReplaceAll(uniqueTestName(t), "-", "")
	ours := map[string]string{LabelRunID: run, LabelRunIDAlt: run}
	stranger := map[string]string{"dev.rightsize.test": "stranger"}

	mixed := sameNamedNetworks(t, d, 3, ours, ours, stranger)
	all := sameNamedNetworks(t, d, 2, ours, ours)
	none := sameNamedNetworks(t, d, 2, stranger, stranger)
	errs := d.Remove(ctx, backend.NetworkKind, run, []string{mixed, all, none})

	if !errors.Is(errs[0], backend.ErrNotOwned) || !errors.Is(errs[0], backend.ErrUnlabelled) || !strings.Contains(errs[0].Error(), "2 network(s) of that name") {
		t.Errorf("Remove of a name two of the run's networks and a stranger's have: %v; want the stranger's not the run's, the run's removed", errs[0])
	}
	if got := networksNamed(t, d, mixed); len(got) != 1 {
		t.Errorf("networks named %s left: %q, want the stranger's alone", mixed, got)
	}
	if errs[1] != nil || len(networksNamed(t, d, all)) != 0 {
		t.Errorf("Remove of a name only the run's networks have: %v, left %q", errs[1], networksNamed(t, d, all))
	}
	if !errors.Is(errs[2], backend.ErrNotOwned) || len(networksNamed(t, d, none)) != 2 {
		t.Errorf("Remove of a name two strangers' networks have: %v, left %q; want both left, not the run's", errs[2], networksNamed(t, d, none))
	}
}
