package ledger_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/ledger"
)

// siblingsList is the runs each other member's sweep considers in runs:
// Node lists the names that end in ".json" (ledger.ts listRunIds,
// rightsize-node 0b3b667), Kotlin the same (Sweeper.kt, rightsize-kotlin
// db2958f), Rust those whose extension is "json" (ledger.rs
// candidate_run_ids, rightsize-rust 7fe6fa92). A stand-in for their
// listing, not their code.
func siblingsList(t testing.TB, runs string) []string {
	t.Helper()
	es, err := os.ReadDir(runs)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range es {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && filepath.Ext(e.Name()) == ".json" {
			ids = append(ids, id)
		}
	}
	return ids
}

// nodeParses reports whether the Node member reads data as a record:
// parseRunRecord (run-record.ts, rightsize-node 0b3b667) wants a number
// pid, a string startedIso and backend exactly "docker" or "msb"; anything
// else is unparseable, and an unparseable record an hour old is reaped
// (sweep.ts) with no liveness check.
func nodeParses(data []byte) bool {
	rec, err := ledger.ParseRecord(data)
	return err == nil && rec.StartedISO != "" && (rec.Backend == "docker" || rec.Backend == "msb") && !strings.Contains(string(data), `"backend":"microsandbox"`)
}

// TestFamilySeesOnlyWhatItJudges: a live Go run is shown to the other
// members (runs/<id>.json) only where they judge it as Go does; every run
// has Go's own record. A run they would misjudge, its files an hour old
// (Node's age for an unparseable record), is not among the runs they list.
func TestFamilySeesOnlyWhatItJudges(t *testing.T) {
	shown := ledger.FamilyJudges(ledger.Owner{Backend: "docker", DefaultEngine: true})
	for _, tc := range []struct {
		name   string
		owner  ledger.Owner
		line   ledger.Kind
		shown  bool
		reason string
	}{
		{"docker, default engine", ledger.Owner{Backend: "docker", Endpoint: "unix:///var/run/docker.sock", DefaultEngine: true}, ledger.SandboxKind, shown,
			"they judge it as Go does (on this host: initial pid namespace, ps on the PATH)"},
		{"msb", ledger.Owner{Backend: "msb", MsbPath: "/usr/local/bin/msb", DefaultEngine: true}, ledger.SandboxKind, shown,
			"msb has one engine"},
		{"docker, another engine", ledger.Owner{Backend: "docker", Endpoint: "unix:///run/other.sock"}, ledger.SandboxKind, false,
			"they record no engine and would sweep it through the default one, where every name is 'not found'"},
		{"local processes", ledger.Owner{Backend: "local"}, ledger.ProcessKind, false,
			"Node reads backend local as unparseable, and reaps it an hour old, live or not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, cache := newRun(t, tc.owner)
			if err := r.Add(tc.line, "rz-"+r.ID()+"-1"); err != nil {
				t.Fatal(err)
			}
			runs := filepath.Join(cache, ledger.RunsDir)
			hourOld := time.Now().Add(-time.Hour - time.Minute)
			es, _ := os.ReadDir(runs)
			for _, e := range es {
				if err := os.Chtimes(filepath.Join(runs, e.Name()), hourOld, hourOld); err != nil {
					t.Fatal(err)
				}
			}
			seen := slices.Contains(siblingsList(t, runs), r.ID())
			if seen != tc.shown {
				t.Fatalf("the other members list the run: %v, want %v (%s)", seen, tc.shown, tc.reason)
			}
			if seen {
				b, err := os.ReadFile(ledger.RecordPath(runs, r.ID()))
				if err != nil || !nodeParses(b) {
					t.Errorf("the family record %q (%v) is not one the Node member parses", b, err)
				}
			}
			rf, err := ledger.ReadRun(cache, r.ID())
			if err != nil || rf.RecordErr != nil || rf.Record != r.Record() {
				t.Errorf("Go reads %+v, %v; want its own record %+v", rf.Record, err, r.Record())
			}
		})
	}
}
