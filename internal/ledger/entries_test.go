package ledger_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// The systemf member's files, byte for byte as it writes them: its record
// is JSON.stringify({pid, startedIso, backend}) (lifecycle/hygiene/
// watchdog.ts doInit, through internal/atomic-write.ts writeFileAtomic),
// and its entries file one JSON.stringify'd entry a line, each ending in
// "\n" (ledger.ts writeLinesAtomic): {kind, backend, name} appended before
// the create (launch.executor.ts trackSandboxLedger), then {..., id} once
// the create returned (recordSandboxId), and {kind, id} for a network
// (appendNetworkEntry); systemfsoftware/systemfsoftware packages/rightsize
// at 9461ab87.
func TestEntriesSystemfFormat(t *testing.T) {
	for _, tc := range []struct {
		record, entries    string
		want               ledger.Record
		sandboxes, network []string
	}{
		{"records/systemf_docker.json", "entries/systemf_docker.jsonl",
			ledger.Record{PID: 20417, StartedISO: "2026-11-29T20:36:06.950Z", Backend: "docker"},
			[]string{"rz-1a2b3c4d-1", "rz-1a2b3c4d-2"}, []string{"rz-net-0a1b2c3d"}},
		{"records/systemf_msb.json", "entries/systemf_msb.jsonl",
			ledger.Record{PID: 20418, StartedISO: "2026-11-29T20:36:07.004Z", Backend: "msb"},
			[]string{"rz-5e6f7a8b-1"}, []string{"rz-net-9c8d7e6f"}},
	} {
		rec, err := ledger.ParseRecord(readFixture(t, tc.record))
		if err != nil || rec != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.record, rec, err, tc.want)
		}
		ef, err := ledger.ReadEntries(filepath.Join("testdata", tc.entries))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ef.Sandboxes, tc.sandboxes) || !slices.Equal(ef.Networks, tc.network) || ef.RejectedCount != 0 || ef.Foreign != 0 {
			t.Errorf("%s: %+v; want sandboxes %q, networks %q, nothing rejected", tc.entries, ef, tc.sandboxes, tc.network)
		}
	}
}

// A run of the systemf member is whole to Go: its entries file is one of
// the run's files (listed, read, deleted with it), a line it cannot parse
// is rejected as its writer's own reader skips it, and a well-formed line
// of a kind Go does not know stays, for a later version of its writer.
func TestEntriesRun(t *testing.T) {
	cache := t.TempDir()
	runs := filepath.Join(cache, ledger.RunsDir)
	if err := os.Mkdir(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	id := "1a2b3c4d"
	writeFile(t, ledger.RecordPath(runs, id), readFixture(t, "records/systemf_docker.json"))
	entries := ledger.EntriesPath(runs, id)
	volume := `{"kind":"volume","id":"rz-vol-0a1b2c3d"}`
	writeFile(t, entries, []byte(string(readFixture(t, "entries/systemf_docker.jsonl"))+
		volume+"\n"+
		`{"kind":"sandbox","backend":"docker","name":"--rm"}`+"\n"+ // a name no engine is handed
		`{"kind":"sandbox","backend":"docker","na`+"\n"+ // torn
		`{"kind":"sandbox","backend":"podman","name":"rz-1a2b3c4d-9"}`+"\n")) // a backend its writer does not read

	rf, err := ledger.ReadRun(cache, id)
	if err != nil || rf.RecordErr != nil || !rf.HasEntries() || !rf.HasLines() {
		t.Fatalf("ReadRun: %+v, %v; want the record and the entries file", rf, err)
	}
	l := rf.ReadLists()
	if want := []string{"rz-1a2b3c4d-1", "rz-1a2b3c4d-2"}; !slices.Equal(l.Sandboxes, want) || !slices.Equal(l.Entry(ledger.SandboxKind), want) || len(l.Plain(ledger.SandboxKind)) != 0 {
		t.Errorf("sandboxes %q (entries %q, plain %q), want %q from the entries file", l.Sandboxes, l.Entry(ledger.SandboxKind), l.Plain(ledger.SandboxKind), want)
	}
	if want := []string{"rz-net-0a1b2c3d"}; !slices.Equal(l.Networks, want) {
		t.Errorf("networks %q, want %q", l.Networks, want)
	}
	if l.RejectedCount != 3 || l.Foreign != 1 || len(l.Problems) != 0 {
		t.Errorf("rejected %d (%v), foreign %d, problems %q; want 3 rejected, 1 of a kind not known here", l.RejectedCount, l.Rejected, l.Foreign, l.Problems)
	}

	// Kept: the second sandbox. The foreign line stays; the rejected go.
	keep := func(k ledger.Kind, n string) bool { return k == ledger.SandboxKind && n == "rz-1a2b3c4d-2" }
	if err := ledger.RewriteEntries(entries, keep); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(entries)
	if want := `{"kind":"sandbox","backend":"docker","name":"rz-1a2b3c4d-2"}` + "\n" + volume + "\n"; string(got) != want {
		t.Errorf("rewritten:\n%s\nwant:\n%s", got, want)
	}
	if err := ledger.RewriteEntries(entries, func(ledger.Kind, string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(entries); string(got) != volume+"\n" {
		t.Errorf("with nothing kept, %q is left; want the foreign line alone", got)
	}

	if err := ledger.RemoveRunFiles(runs, id); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(runs); len(left) != 0 {
		t.Errorf("RemoveRunFiles left %v", left)
	}
}

// A file of a run that no reader here understands is listed with the run
// (Unknown), by the scan and by ReadRun alike; a lock or a temporary file
// of the run is not such a file, nor is another run's.
func TestScanUnknownFiles(t *testing.T) {
	cache := t.TempDir()
	runs := filepath.Join(cache, ledger.RunsDir)
	if err := os.Mkdir(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	put := func(name string) {
		writeFile(t, filepath.Join(runs, name), []byte(`{"pid":1,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker"}`))
	}
	for _, name := range []string{
		"1a2b3c4d.json", "1a2b3c4d.snapshots", "1a2b3c4d.lock", "1a2b3c4d.json.tmp", ".1a2b3c4d.jsonl.77.0.tmp",
		"1a2b3c4e.json", "1a2b3c4d.x.snapshots",
	} {
		put(name)
	}
	s, err := ledger.ScanRuns(cache)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	if err := s.Each(func(rf ledger.RunFiles) error { got[rf.ID] = rf.Unknown; return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1a2b3c4d.snapshots"}; !slices.Equal(got["1a2b3c4d"], want) || len(got["1a2b3c4e"]) != 0 {
		t.Errorf("unknown files %q; want %q for 1a2b3c4d, none for 1a2b3c4e", got, want)
	}
	rf, err := ledger.ReadRun(cache, "1a2b3c4d")
	if err != nil || !slices.Equal(rf.Unknown, []string{"1a2b3c4d.snapshots"}) {
		t.Errorf("ReadRun: unknown %q, %v", rf.Unknown, err)
	}
}
