package rightsize_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

// noSuchPID is above the largest pid Linux can give (2^22), so no process
// has it, on this machine or any other.
const noSuchPID = 1<<22 + 1

// A run's record is judged from this process, by its pid and start time:
// the owner here does not exist, so whatever the run lists may be removed.
func Example_judge() {
	rec := ledger.Record{PID: noSuchPID, StartedISO: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), Backend: "docker"}
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

// A sweep from code, as `rightsize sweep --run` makes it from a shell,
// here on the memory backend (files of this host, no engine): a run whose
// owner died before its sandbox was made is reaped, the sandbox it lists
// found already gone, its files deleted.
func Example_sweep() {
	cache, err := os.MkdirTemp("", "rightsize-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(cache)
	// The memory backend keeps its sandboxes in memory/ of the cache folder.
	for k, v := range map[string]string{"RIGHTSIZE_BACKEND": "memory", "RIGHTSIZE_CACHE_DIR": cache} {
		old, had := os.LookupEnv(k)
		os.Setenv(k, v)
		defer func() { // as the caller had them
			if had {
				os.Setenv(k, old)
			} else {
				os.Unsetenv(k)
			}
		}()
	}

	// A dead run's record and its one ledger line, as any member writes
	// them.
	runs := filepath.Join(cache, "runs")
	started := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	rec := fmt.Sprintf(`{"pid":%d,"startedIso":"%s","backend":"memory"}`, noSuchPID, started)
	if err := os.MkdirAll(runs, 0o700); err != nil {
		fmt.Println(err)
		return
	}
	if err := os.WriteFile(filepath.Join(runs, "0badc0de.json"), []byte(rec+"\n"), 0o600); err != nil {
		fmt.Println(err)
		return
	}
	if err := os.WriteFile(filepath.Join(runs, "0badc0de.sandboxes"), []byte("rz-0badc0de-1\n"), 0o600); err != nil {
		fmt.Println(err)
		return
	}

	rep, err := reaper.Sweep(context.Background(), reaper.OnlyRun("0badc0de"))
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
	_, err = os.Stat(filepath.Join(runs, "0badc0de.json"))
	fmt.Println("record left:", err == nil)
	// Output:
	// run 0badc0de: reaped (dead: no process has pid 4194305)
	//    sandbox rz-0badc0de-1: already gone
	// record left: false
}
