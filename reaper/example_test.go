package reaper_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rightsize/rightsize-go/reaper"
)

// A dry run decides as a sweep does and touches nothing: here, on the
// memory backend (files of this host, no engine), a run whose owner never
// ran would be reaped, and the sandbox it lists removed.
func ExampleDryRun() {
	cache, err := os.MkdirTemp("", "rightsize-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(cache)
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

	// A record and a ledger line as rightsize-go writes them, of a run of
	// another boot: its owner is dead, whatever runs as pid 4194305 now.
	runs := filepath.Join(cache, "runs")
	os.MkdirAll(runs, 0o700)
	os.WriteFile(filepath.Join(runs, "0badc0de.json"), []byte(`{"pid":4194305,"startedIso":"2026-11-29T20:36:06.950Z","backend":"memory","bootId":"another-boot","writer":"go"}`), 0o600)
	os.WriteFile(filepath.Join(runs, "0badc0de.sandboxes"), []byte("rz-0badc0de-1\n"), 0o600)

	rep, err := reaper.Sweep(context.Background(), reaper.DryRun())
	if err != nil {
		fmt.Println(err)
		return
	}
	rr, _ := rep.Run("0badc0de")
	fmt.Println(rr.Decision, "-", rr.Liveness.State)
	fmt.Println("would reap:", rep.Count(reaper.WouldReap), "reaped:", rep.Count(reaper.Reaped))
	_, err = os.Stat(filepath.Join(runs, "0badc0de.json"))
	fmt.Println("record left:", err == nil)
	// Output:
	// would reap - dead
	// would reap: 1 reaped: 0
	// record left: true
}
