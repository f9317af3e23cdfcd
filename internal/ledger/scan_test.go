package ledger_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

func TestListRuns(t *testing.T) {
	cache := t.TempDir()
	runs := filepath.Join(cache, ledger.RunsDir)
	if err := os.Mkdir(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte) string { return writeFile(t, filepath.Join(runs, name), data) }

	// Every family fixture, under a run id of its own.
	fixtures := map[string]string{
		"rust1":                  "records/rust_docker.json",
		"rust2":                  "records/rust_microsandbox.json",
		"rust3":                  "records/rust_empty_started.json",
		"kotlin1":                "records/kotlin_tenths.json",
		"kotlin2":                "records/kotlin_micros.json",
		"0123abcd":               "records/node_docker.json",
		"go000001":               "records/go_docker.json",
		"go000002":               "records/go_msb.json",
		"an-id-longer-than-8hex": "records/unknown_fields.json",
	}
	for id, f := range fixtures {
		put(id+ledger.RecordExt, readFixture(t, f))
	}
	put("0123abcd"+ledger.SandboxesExt, []byte("rz-0123abcd-1\n"))
	put("0123abcd"+ledger.NetworksExt, []byte("rz-net-0badcafe\n"))

	put("orphan"+ledger.SandboxesExt, []byte("rz-orphan-1\n"))
	garbage := put("garbage"+ledger.RecordExt, []byte("{\"pid\":12"))
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(garbage, old, old); err != nil {
		t.Fatal(err)
	}
	put("huge"+ledger.RecordExt, bytes.Repeat([]byte(" "), ledger.MaxRecordSize+1))
	outside := writeFile(t, filepath.Join(t.TempDir(), "valid.json"), readFixture(t, "records/node_docker.json"))
	symlinkOrSkip(t, outside, filepath.Join(runs, "linked"+ledger.RecordExt))
	put("linkedlines"+ledger.RecordExt, readFixture(t, "records/node_docker.json"))
	outsideLines := writeFile(t, filepath.Join(t.TempDir(), "valid.sandboxes"), []byte("rz-outside-1\n"))
	symlinkOrSkip(t, outsideLines, filepath.Join(runs, "linkedlines"+ledger.SandboxesExt))
	if err := os.Mkdir(filepath.Join(runs, "x"+ledger.RecordExt), 0o700); err != nil {
		t.Fatal(err)
	}
	put(".0123abcd.json.tmp-123456", []byte("{\"pid\":1"))
	put(".hidden"+ledger.RecordExt, readFixture(t, "records/node_docker.json"))
	put("notes.txt", []byte("hello"))
	put("0123abcd"+ledger.LockExt, nil)
	put("other.json.bak", readFixture(t, "records/node_docker.json"))

	got, err := ledger.ListRuns(cache)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]ledger.RunFiles{}
	var ids []string
	for _, rf := range got {
		byID[rf.ID] = rf
		ids = append(ids, rf.ID)
		if rf.Dir != runs {
			t.Errorf("%s: Dir %q, want %q", rf.ID, rf.Dir, runs)
		}
	}
	wantIDs := []string{"0123abcd", "an-id-longer-than-8hex", "garbage", "go000001", "go000002", "huge", "kotlin1", "kotlin2",
		"linked", "linkedlines", "orphan", "rust1", "rust2", "rust3", "x"}
	if !slices.Equal(ids, wantIDs) {
		t.Errorf("ids = %q\nwant %q\n(sorted; hidden temporary files and other extensions are not runs)", ids, wantIDs)
	}

	tests := []struct {
		id       string
		ok       bool   // the record parsed
		errIs    error  // when not ok, errors.Is target (nil: any error)
		errHas   string // when not ok, a part of the message
		backend  string
		problems int
		sbx, net bool
		reason   string
	}{
		{id: "rust1", ok: true, backend: "docker", reason: "Rust's pretty record"},
		{id: "rust2", ok: true, backend: "msb", reason: `"microsandbox" read as msb`},
		{id: "rust3", ok: true, backend: "docker", reason: "an empty startedIso is a valid record"},
		{id: "kotlin1", ok: true, backend: "docker", reason: "Kotlin's variable fraction"},
		{id: "kotlin2", ok: true, backend: "msb", reason: "Kotlin's msb record"},
		{id: "0123abcd", ok: true, backend: "docker", sbx: true, net: true, reason: "Node's record with both line files"},
		{id: "go000001", ok: true, backend: "docker", reason: "a Go record"},
		{id: "go000002", ok: true, backend: "msb", reason: "a Go msb record"},
		{id: "an-id-longer-than-8hex", ok: true, backend: "docker", reason: "any file stem is a run id; unknown fields ignored"},
		{id: "orphan", errIs: ledger.ErrNoRecord, sbx: true, reason: "line files without a record: ErrNoRecord, so the sweep ages it"},
		{id: "garbage", errHas: "JSON", reason: "a truncated record is reported, with its age"},
		{id: "huge", errHas: "bytes", reason: "a record over 1 MiB is refused unread"},
		{id: "linked", errHas: "symbolic link", problems: 1, reason: "a symbolic link is reported and not followed, even to a valid record"},
		{id: "linkedlines", ok: true, backend: "docker", sbx: true, reason: "a symbolic link as line file is listed; reading it is a problem of the run (below)"},
		{id: "x", errHas: "not a regular file", problems: 1, reason: "a directory named x.json is not a record"},
	}
	for _, tc := range tests {
		rf, found := byID[tc.id]
		if !found {
			t.Errorf("%s: not listed (%s)", tc.id, tc.reason)
			continue
		}
		if tc.ok {
			if rf.RecordErr != nil {
				t.Errorf("%s: RecordErr %v, want a record (%s)", tc.id, rf.RecordErr, tc.reason)
			} else if rf.Record.Backend != tc.backend || rf.Record.PID <= 0 {
				t.Errorf("%s: record %+v, want backend %q (%s)", tc.id, rf.Record, tc.backend, tc.reason)
			}
		} else {
			switch {
			case rf.RecordErr == nil:
				t.Errorf("%s: parsed as %+v, want an error (%s)", tc.id, rf.Record, tc.reason)
			case tc.errIs != nil && !errors.Is(rf.RecordErr, tc.errIs):
				t.Errorf("%s: RecordErr %v, want %v (%s)", tc.id, rf.RecordErr, tc.errIs, tc.reason)
			case !strings.Contains(rf.RecordErr.Error(), tc.errHas):
				t.Errorf("%s: RecordErr %q does not mention %q (%s)", tc.id, rf.RecordErr, tc.errHas, tc.reason)
			}
			if rf.Record != (ledger.Record{}) {
				t.Errorf("%s: unusable record carries values %+v", tc.id, rf.Record)
			}
		}
		if len(rf.Problems) != tc.problems {
			t.Errorf("%s: problems %q, want %d (%s)", tc.id, rf.Problems, tc.problems, tc.reason)
		}
		if rf.Has(ledger.SandboxKind) != tc.sbx || rf.Has(ledger.NetworkKind) != tc.net {
			t.Errorf("%s: HasSandboxes %v HasNetworks %v, want %v %v", tc.id, rf.Has(ledger.SandboxKind), rf.Has(ledger.NetworkKind), tc.sbx, tc.net)
		}
	}

	if age := byID["garbage"].Age(time.Now()); age < 2*time.Hour-time.Minute || age > 2*time.Hour+time.Minute {
		t.Errorf("garbage: Age %v, want about 2h: the sweep reaps unparseable records only once they are old", age)
	}
	if byID["orphan"].ModTime.IsZero() {
		t.Error("orphan: no ModTime: a run without record must still have an age")
	}
	if age := byID["0123abcd"].Age(time.Now()); age < 0 || age > time.Hour {
		t.Errorf("fresh record: Age %v", age)
	}

	l := byID["0123abcd"].ReadLists()
	if !slices.Equal(l.Sandboxes, []string{"rz-0123abcd-1"}) || !slices.Equal(l.Networks, []string{"rz-net-0badcafe"}) || l.Problems != nil || l.Rejected != nil {
		t.Errorf("ReadLists(0123abcd) = %+v", l)
	}
	l = byID["linkedlines"].ReadLists()
	if len(l.Sandboxes) != 0 || len(l.Problems) != 1 {
		t.Errorf("ReadLists(linkedlines) = %+v: a linked line file is a problem, its target never read", l)
	}

	rf, err := ledger.ReadRun(cache, "orphan")
	if err != nil || rf.ID != "orphan" || !errors.Is(rf.RecordErr, ledger.ErrNoRecord) {
		t.Errorf("ReadRun(orphan) = %+v, %v", rf, err)
	}
	if _, err := ledger.ReadRun(cache, "nope"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadRun(nope) error %v, want ErrNotExist", err)
	}
}

func TestListRunsFolder(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		got, err := ledger.ListRuns(t.TempDir())
		if err != nil || len(got) != 0 {
			t.Errorf("ListRuns without runs/ = %v, %v; want no runs and no error", got, err)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		elsewhere := t.TempDir()
		if err := os.Mkdir(filepath.Join(elsewhere, ledger.RunsDir), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(elsewhere, ledger.RunsDir, "abcd1234.json"), readFixture(t, "records/node_docker.json"))
		cache := t.TempDir()
		symlinkOrSkip(t, filepath.Join(elsewhere, ledger.RunsDir), filepath.Join(cache, ledger.RunsDir))
		got, err := ledger.ListRuns(cache)
		if err == nil {
			t.Errorf("ListRuns with runs/ a symbolic link = %v, nil; want an error: the ledger is never read through a link", got)
		}
	})
	t.Run("file", func(t *testing.T) {
		cache := t.TempDir()
		writeFile(t, filepath.Join(cache, ledger.RunsDir), nil)
		if _, err := ledger.ListRuns(cache); err == nil {
			t.Error("ListRuns with runs/ a regular file: no error")
		}
	})
}

func TestRemoveRunFiles(t *testing.T) {
	r, cache := newRun(t, ledger.Owner{Backend: "docker", DefaultEngine: true})
	if err := r.Add(ledger.SandboxKind, "rz-1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(ledger.NetworkKind, "rz-net-1"); err != nil {
		t.Fatal(err)
	}
	other := writeFile(t, filepath.Join(r.RunsDir(), "0ther000.sandboxes"), []byte("rz-2\n"))
	rf, err := ledger.ReadRun(cache, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := rf.RemoveFiles(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(r.RunsDir())
	if len(entries) != 1 || !exists(t, other) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("after RemoveFiles runs/ holds %q, want only %s", names, filepath.Base(other))
	}
	if err := ledger.RemoveRunFiles(r.RunsDir(), r.ID()); err != nil {
		t.Errorf("RemoveRunFiles twice: %v: it must be idempotent (sweeps race)", err)
	}
}

// The temporary files every member may leave behind when killed between
// writing one and renaming it are found, whoever wrote them; nothing else is.
func TestScanTemps(t *testing.T) {
	cache := t.TempDir()
	runs := filepath.Join(cache, ledger.RunsDir)
	if err := os.Mkdir(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	temps := []string{
		".1a2b3c4d.json.tmp-123456", ".1a2b3c4d.sandboxes.tmp-9", // Go
		".1a2b3c4d.gorecord.tmp-77",                   // Go's own record
		".1a2b3c4d.sandboxes.tmp.4242",                // Go's watchdog
		"1a2b3c4d.json.tmp", "1a2b3c4d.sandboxes.tmp", // Rust
		".5e6f7a8b.json.tmp-4242-1764000000000", // Node
		"9c0d1e2f.json8822137716293849.tmp",     // Kotlin
	}
	others := []string{"1a2b3c4d.json", "1a2b3c4d.sandboxes", "1a2b3c4d.lock", "notes.txt", "x.tmp", ".hidden"}
	for _, n := range append(slices.Clone(temps), others...) {
		writeFile(t, filepath.Join(runs, n), []byte("{}"))
	}
	s, err := ledger.ScanRuns(cache)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Temps()
	slices.Sort(got)
	slices.Sort(temps)
	if !slices.Equal(got, temps) {
		t.Errorf("Temps() = %q\nwant %q", got, temps)
	}
	if l := s.Locks(); !slices.Equal(l, []string{"1a2b3c4d"}) {
		t.Errorf("Locks() = %q, want [1a2b3c4d]", l)
	}
	if s.Len() != 1 || !s.HasRun("1a2b3c4d") || s.HasRun("5e6f7a8b") {
		t.Errorf("Len = %d, HasRun: want one run, 1a2b3c4d", s.Len())
	}
}

func TestWriteLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "w.sandboxes")
	if err := ledger.WriteLines(p, []string{"rz-1", "rz-2"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "rz-1\nrz-2\n" {
		t.Errorf("WriteLines wrote %q", b)
	}
	if err := ledger.WriteLines(p, []string{"rz-1", "bad name"}); err == nil {
		t.Error("WriteLines accepted an invalid name")
	}
	if b, _ := os.ReadFile(p); string(b) != "rz-1\nrz-2\n" {
		t.Errorf("a refused WriteLines changed the file to %q", b)
	}
	if err := ledger.WriteLines(p, nil); err != nil || exists(t, p) {
		t.Errorf("WriteLines(no names) = %v, file exists %v: want it removed", err, exists(t, p))
	}
}

// Rewriting a line file replaces a regular file and nothing else.
func TestWriteLinesReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.sandboxes")
	for i, names := range [][]string{{"rz-1"}, {"rz-1", "rz-2"}, {"rz-2"}} {
		if err := ledger.WriteLines(p, names); err != nil {
			t.Fatal(err)
		}
		if got := readLinesOK(t, p); !slices.Equal(got, names) {
			t.Errorf("rewrite %d: %q, want %q", i, got, names)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("after rewrites the folder holds %d entries, want only the line file (temporary files removed)", len(entries))
	}
	d := filepath.Join(dir, "d.sandboxes")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(d, "keep"), nil)
	if err := ledger.WriteLines(d, []string{"rz-1"}); err == nil {
		t.Error("WriteLines replaced a directory")
	}
	if !exists(t, filepath.Join(d, "keep")) {
		t.Error("the directory's content is gone")
	}
}

// Go's own record (runs/<id>.gorecord) is the one Go reads: a member that
// reaped a dead Go run deleted the family's .json, .sandboxes and
// .networks (sweep.ts deleteRunRecordFiles, rightsize-node 0b3b667;
// Sweeper.kt deleteRunFiles, rightsize-kotlin db2958f; ledger.rs
// delete_files_locked, rightsize-rust 7fe6fa92) and left .processes: the
// run is still whole to Go. The family's is read only where Go's cannot be.
func TestListRunsOwnRecord(t *testing.T) {
	cache := t.TempDir()
	runs := filepath.Join(cache, ledger.RunsDir)
	if err := os.Mkdir(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	put := func(name, data string) string { return writeFile(t, filepath.Join(runs, name), []byte(data)) }
	goRec := `{"pid":4242,"startedIso":"2026-11-29T20:30:38.120Z","backend":"local","writer":"go"}` + "\n"
	famRec := `{"pid":77,"startedIso":"2026-11-29T20:30:38.120Z","backend":"docker"}`

	put("aaaa0001"+ledger.OwnRecordExt, goRec) // what a sibling's reap leaves of a Go run
	put("aaaa0001"+ledger.ProcessesExt, "p1.4242\n")
	put("aaaa0002"+ledger.OwnRecordExt, goRec) // both: Go's own wins
	put("aaaa0002"+ledger.RecordExt, famRec)
	put("aaaa0003"+ledger.OwnRecordExt, "{") // Go's unreadable: the family's
	put("aaaa0003"+ledger.RecordExt, famRec)
	put("aaaa0004"+ledger.OwnRecordExt, "{") // neither
	put("aaaa0004"+ledger.SandboxesExt, "rz-aaaa0004-1\n")

	s, err := ledger.ScanRuns(cache)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 4 {
		t.Fatalf("scan holds %d runs, want 4", s.Len())
	}
	got := map[string]ledger.RunFiles{}
	if err := s.Each(func(rf ledger.RunFiles) error { got[rf.ID] = rf; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id     string
		pid    int
		err    bool
		reason string
	}{
		{"aaaa0001", 4242, false, "Go's own record and .processes are all a sibling's reap leaves: still a run, judged by its record"},
		{"aaaa0002", 4242, false, "with both, Go's own is read"},
		{"aaaa0003", 77, false, "the family's stands in for Go's own when that cannot be read"},
		{"aaaa0004", 0, true, "an unreadable record is an error, never no record"},
	} {
		rf := got[tc.id]
		switch {
		case tc.err && (rf.RecordErr == nil || errors.Is(rf.RecordErr, ledger.ErrNoRecord)):
			t.Errorf("%s: RecordErr %v, want the parse error (%s)", tc.id, rf.RecordErr, tc.reason)
		case !tc.err && (rf.RecordErr != nil || rf.Record.PID != tc.pid):
			t.Errorf("%s: record %+v, %v; want pid %d (%s)", tc.id, rf.Record, rf.RecordErr, tc.pid, tc.reason)
		}
		if !rf.HasRecord() {
			t.Errorf("%s: HasRecord false", tc.id)
		}
	}
	if !got["aaaa0001"].Has(ledger.ProcessKind) {
		t.Error("aaaa0001: its .processes is not listed")
	}
	for _, id := range []string{"aaaa0001", "aaaa0002", "aaaa0003", "aaaa0004"} {
		if err := got[id].RemoveFiles(); err != nil {
			t.Fatal(err)
		}
	}
	if left, _ := os.ReadDir(runs); len(left) != 0 {
		t.Errorf("RemoveFiles left %d files, the records of both kinds included", len(left))
	}
}

// A sweep lists the folder, then judges each run: an owner alive at the
// listing, between its record and its first line, may write the line and
// die before its run is judged. The run's files as listed are then a
// record only, and deleting them must not leave the line without it (a
// run with no record is never reaped by age).
func TestRemoveFilesKeepsTheRecordOfLinesWrittenSinceTheListing(t *testing.T) {
	for _, o := range []ledger.Owner{{Backend: "local"}, {Backend: "docker", DefaultEngine: true}} {
		t.Run(o.Backend, func(t *testing.T) {
			r, cache := newRun(t, o)
			if err := r.Add(ledger.SandboxKind, "rz-1"); err != nil {
				t.Fatal(err)
			}
			// The owner between its record and its first line.
			if err := os.Remove(ledger.LinePath(r.RunsDir(), r.ID(), ledger.SandboxKind)); err != nil {
				t.Fatal(err)
			}
			rf, err := ledger.ReadRun(cache, r.ID())
			if err != nil {
				t.Fatal(err)
			}
			if rf.HasLines() || !rf.HasRecord() {
				t.Fatalf("listed: lines %v, record %v; want a record only", rf.HasLines(), rf.HasRecord())
			}
			// Its next line, then its death.
			if err := r.Add(ledger.NetworkKind, "rz-net-1"); err != nil {
				t.Fatal(err)
			}
			if err := rf.RemoveFiles(); !errors.Is(err, ledger.ErrLinesSince) {
				t.Errorf("RemoveFiles = %v, want ErrLinesSince", err)
			}
			now, err := ledger.ReadRun(cache, r.ID())
			if err != nil {
				t.Fatal(err)
			}
			if !now.HasRecord() || now.RecordErr != nil || !now.Has(ledger.NetworkKind) {
				t.Errorf("after RemoveFiles: record %v (%v), networks %v; want both, for the next sweep", now.HasRecord(), now.RecordErr, now.Has(ledger.NetworkKind))
			}
		})
	}
}
