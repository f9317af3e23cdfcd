package keeper

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
)

// Orphans judges only runs whose containers carry the kept mark, with no
// keeper on the engine, once their youngest container is older than the
// lease. The marks here say an hour: no other sweep on this shared engine
// judges them meanwhile; the test's clock is moved instead.
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
	ours := []string{orphan, held, plain, keepAlive, badMark}

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
	if got := judged(time.Now().Add(2 * time.Hour)); !maps.Equal(got, map[string]int{orphan: 2}) {
		t.Errorf("two hours on: judged %v, want only run %s with its 2 containers (held %s, plain %s, keep-alive %s, bad mark %s)", got, orphan, held, plain, keepAlive, badMark)
	}
}
