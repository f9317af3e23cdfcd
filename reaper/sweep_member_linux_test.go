//go:build linux

package reaper_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

// TestSweepByHandKeepsMemberNetwork: a dead Node run lists a network Node
// made as it makes them (named rz-net-<8 hex>, no label). Go never removes
// it, and a person's `rightsize sweep --run ID` of that run keeps its line
// and its record: Node's own sweep, which removes its networks by name,
// must still find it there. (Dropped, the network would leak for good.)
func TestSweepByHandKeepsMemberNetwork(t *testing.T) {
	t.Parallel()
	d := openDocker(t)
	if !d.DefaultEndpoint() {
		t.Skipf("the engine is %s: the other members' runs, which record none, are judged on the default engine only", d.Endpoint())
	}
	cache := t.TempDir()
	runs := runsDir(t, cache)
	id := randHex(t, 8)
	net := "rz-net-" + randHex(t, 8)
	ctx := context.Background()
	if _, err := d.Client().NetworkCreate(ctx, net, client.NetworkCreateOptions{}); err != nil {
		t.Fatalf("create network %s: %v", net, err)
	}
	t.Cleanup(func() { d.Client().NetworkRemove(context.Background(), net, client.NetworkRemoveOptions{}) })
	dead := deadProcess(t)
	// As rightsize-node writes it: compact, no writer, no engine.
	record := fmt.Sprintf(`{"pid":%d,"startedIso":"%s","backend":"docker"}`, dead.PID, ledger.FormatISO(dead.Start))
	writeRun(t, runs, id, []byte(record), nil, []string{net})

	for _, byHand := range []bool{false, true} {
		opts := []reaper.Option{reaper.WithCacheDir(cache)}
		if byHand {
			opts = append(opts, reaper.OnlyRun(id))
		}
		rep, err := reaper.Sweep(ctx, d, opts...)
		must(t, err)
		rr, ok := rep.Run(id)
		if !ok || rr.Decision != reaper.Kept || len(rr.Kept) != 1 || rr.Kept[0].Outcome != reaper.LeftForMember {
			t.Fatalf("by hand %v: run %s: %+v; want it kept, its network left for its member's sweep", byHand, id, rr)
		}
		if !rep.Clean() {
			t.Errorf("by hand %v: a network left for its member makes the sweep unclean", byHand)
		}
		if strings.Contains(rr.Kept[0].Note, "drops it") {
			t.Errorf("by hand %v: the note still advises dropping it: %s", byHand, rr.Kept[0].Note)
		}
		if !networkExists(t, d, net) {
			t.Fatalf("by hand %v: Go removed the unlabelled network %s", byHand, net)
		}
		rf, err := ledger.ReadRun(cache, id)
		if err != nil || rf.RecordErr != nil {
			t.Fatalf("by hand %v: the run's record is gone (%v, %v): no Node sweep can find its network", byHand, err, rf.RecordErr)
		}
		if l := rf.ReadLists(); len(l.Networks) != 1 || l.Networks[0] != net {
			t.Fatalf("by hand %v: the run lists %q, want [%s] for Node's sweep", byHand, l.Networks, net)
		}
	}
}
