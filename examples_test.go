package rightsize_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/memory"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

// noSuchPID is above the largest pid Linux can give (2^22), so no process
// has it, on this machine or any other.
const noSuchPID = 1<<22 + 1

// A run's record is judged from this process, by its pid and start time:
// the owner here does not exist, so whatever the run lists may be removed.
func Example_judge() {
	rec := ledger.Record{PID: noSuchPID, StartedISO: ledger.FormatISO(time.Now()), Backend: backend.Docker}
	fmt.Println(ledger.Judge(rec))
	// Output:
	// dead: no process has pid 4194305
}

// A Spec with Reuse set names a keep-alive sandbox after what it is: the
// same image, command, environment, ports, memory limit and files give the
// same name in every member of the family, and nothing run-scoped ever
// removes it.
func Example_keepAliveName() {
	// The identity of sandboxtest.Spec{Image: "redis:7-alpine",
	// Ports: []string{"6379/tcp"}, Reuse: true}.
	id := ledger.ReuseIdentity{Image: "redis:7-alpine", ExposedPorts: []string{"6379/tcp"}}
	fmt.Println(ledger.ReuseName(id.Hash()))
	// Output:
	// rz-reuse-2a264fe39104
}

// The sweep a process makes at its first use, here on the memory backend
// (files of this host, no engine): a dead run's sandbox is removed, a live
// run's is left alone.
func Example_sweep() {
	cache, err := os.MkdirTemp("", "rightsize-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(cache)
	drv, err := memory.Open(filepath.Join(cache, "memory"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	// A run whose owner died: its record, its ledger line, its sandbox.
	runs, err := ledger.EnsureSubdir(cache, ledger.RunsDir)
	if err != nil {
		fmt.Println(err)
		return
	}
	dead := ledger.Record{PID: noSuchPID, StartedISO: ledger.FormatISO(time.Now().Add(-time.Minute)), Backend: drv.Name(), Endpoint: drv.Endpoint(), Writer: "go"}
	if err := ledger.WriteFileAtomic(ledger.OwnRecordPath(runs, "0badc0de"), dead.Marshal()); err != nil {
		fmt.Println(err)
		return
	}
	if err := ledger.WriteLines(ledger.LinePath(runs, "0badc0de", ledger.SandboxKind), []string{"rz-0badc0de-1"}); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := drv.Create(ctx, "rz-0badc0de-1", backend.Spec{Image: "memory/idle", RunID: "0badc0de"}); err != nil {
		fmt.Println(err)
		return
	}

	rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, rr := range rep.Runs {
		fmt.Printf("run %s: %s (%s)\n", rr.ID, rr.Decision, rr.Reason)
		for _, it := range rr.Removed {
			fmt.Println("  ", it)
		}
	}
	_, err = drv.Adopt(ctx, "rz-0badc0de-1")
	fmt.Println("still there:", err == nil)
	// Output:
	// run 0badc0de: reaped (dead: no process has pid 4194305)
	//    sandbox rz-0badc0de-1: removed
	// still there: false
}
