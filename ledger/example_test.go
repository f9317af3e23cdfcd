package ledger_test

import (
	"fmt"
	"time"

	"github.com/rightsize/rightsize-go/ledger"
)

// A record as the Rust member writes it (pretty-printed, whole seconds,
// "microsandbox") reads as any other member's; Marshal writes it back as
// the family does. A corrupt record is an error that says why.
func ExampleParseRecord() {
	rust := "{\n  \"pid\": 31337,\n  \"startedIso\": \"2026-11-29T20:30:38Z\",\n  \"backend\": \"microsandbox\",\n  \"msbPath\": \"/usr/local/bin/msb\"\n}"
	rec, err := ledger.ParseRecord([]byte(rust))
	if err != nil {
		fmt.Println(err)
		return
	}
	started, _ := rec.Started()
	fmt.Println(rec.PID, rec.Backend, started.Format(time.RFC3339))
	fmt.Printf("%s", rec.Marshal())

	_, err = ledger.ParseRecord([]byte(`{"pid":"31337","backend":"docker"}`))
	fmt.Println(err)
	// Output:
	// 31337 msb 2026-11-29T20:30:38Z
	// {"pid":31337,"startedIso":"2026-11-29T20:30:38Z","backend":"msb","msbPath":"/usr/local/bin/msb"}
	// record "pid" "31337" is not a process id
}

// A record rightsize-go wrote in another boot: whatever runs as its pid
// now, no process of that boot is left, so its owner is dead and what the
// run lists may be removed. The reason says which rule decided.
func ExampleJudge() {
	rec := ledger.Record{PID: 4194305, StartedISO: "2026-11-29T20:30:38.120Z", Backend: "docker",
		BootID: "00000000-0000-0000-0000-000000000000", Writer: "go"}
	lv := ledger.Judge(rec)
	fmt.Println(lv.State, lv.Reason != "")
	// Output:
	// dead true
}

// The keep-alive identity of a Spec{Image: "redis:7-alpine", Env: …,
// Ports: []string{"6379/tcp"}, Reuse: true}, in the canonical form every
// member of the family hashes, and the name they all give its sandbox.
func ExampleReuseIdentity_CanonicalJSON() {
	id := ledger.ReuseIdentity{
		Image:        "redis:7-alpine",
		Env:          map[string]string{"B": "2", "A": "1"},
		ExposedPorts: []string{"6379/tcp"},
	}
	fmt.Printf("%s\n", id.CanonicalJSON())
	fmt.Println(id.Hash())
	fmt.Println(ledger.ReuseName(id.Hash()))
	// Output:
	// {"image":"redis:7-alpine","env":{"A":"1","B":"2"},"command":[],"exposedPorts":[6379],"memoryLimitMb":null,"copies":[]}
	// 799aad5a3338ce3d36999c7ff2733d4673c0592d417563f334544693ec1907a5
	// rz-reuse-799aad5a3338
}

// What became of each thing a dead run left is one of the Outcome words;
// Gone says which leave nothing behind.
func ExampleOutcome_Gone() {
	for _, o := range []ledger.Outcome{ledger.Removed, ledger.AlreadyGone, ledger.Kept, ledger.NotOwned} {
		fmt.Printf("%s: gone %v\n", o, o.Gone())
	}
	// Output:
	// removed: gone true
	// already gone: gone true
	// kept: gone false
	// not this run's: gone false
}

// Any file stem inside the runs folder is a run id (the other members
// choose their own); nothing that could reach outside it, or read as an
// option, is.
func ExampleValidRunID() {
	for _, id := range []string{"1a2b3c4d", "run-from-kotlin-test", "../etc", ".hidden", "-rf"} {
		fmt.Println(id, ledger.ValidRunID(id))
	}
	// Output:
	// 1a2b3c4d true
	// run-from-kotlin-test true
	// ../etc false
	// .hidden false
	// -rf false
}
