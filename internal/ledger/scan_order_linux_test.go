package ledger_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"syscall"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// EachOnDisk visits the runs Each visits, each once and read alike, only
// in another order: on Linux, that of their first file's inode number.
func TestEachOnDisk(t *testing.T) {
	cache := t.TempDir()
	runs, err := ledger.EnsureSubdir(cache, ledger.RunsDir)
	if err != nil {
		t.Fatal(err)
	}
	rec := ledger.Record{PID: 4242, StartedISO: "2026-11-29T20:30:38.120Z", Backend: "docker"}.Marshal()
	put := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(runs, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Written in an order unlike that of their ids, some with line files
	// (written before the record, so that the record is not the first file
	// made), some with lines only, some with a record that does not parse.
	for i := range 300 {
		id := fmt.Sprintf("%08x", (i*7919)%300)
		switch i % 5 {
		case 0:
			put(id+ledger.SandboxesExt, []byte("rz-"+id+"-1\n"))
			put(id+ledger.RecordExt, rec)
		case 1:
			put(id+ledger.NetworksExt, []byte("rz-net-0badcafe\n"))
		case 2:
			put(id+ledger.RecordExt, []byte("{"))
		default:
			put(id+ledger.RecordExt, rec)
		}
	}
	put("notes.txt", nil)
	put(".0000002a.json.tmp-1", rec)
	s, err := ledger.ScanRuns(cache)
	if err != nil {
		t.Fatal(err)
	}
	var inOrder, onDisk []ledger.RunFiles
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Each(func(rf ledger.RunFiles) error { inOrder = append(inOrder, rf); return nil }))
	must(s.EachOnDisk(func(rf ledger.RunFiles) error { onDisk = append(onDisk, rf); return nil }))
	if len(inOrder) != 300 || len(onDisk) != 300 {
		t.Fatalf("Each gave %d runs, EachOnDisk %d; want 300", len(inOrder), len(onDisk))
	}
	byID := slices.Clone(onDisk)
	slices.SortFunc(byID, func(a, b ledger.RunFiles) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	for i := range inOrder {
		a, b := inOrder[i], byID[i]
		// Errors are compared by their text: each read makes its own.
		if a.ID != b.ID || !reflect.DeepEqual(a.Record, b.Record) || fmt.Sprint(a.RecordErr) != fmt.Sprint(b.RecordErr) ||
			!a.ModTime.Equal(b.ModTime) || a.HasLines() != b.HasLines() || a.Has(ledger.NetworkKind) != b.Has(ledger.NetworkKind) {
			t.Errorf("run %s: Each read %+v, EachOnDisk %+v", a.ID, a, b)
		}
	}
	// The order of the inode of each run's first file: its record, else
	// its first line file.
	var last uint64
	for _, rf := range onDisk {
		first := ledger.RecordPath(runs, rf.ID)
		if _, err := os.Lstat(first); err != nil {
			first = ledger.LinePath(runs, rf.ID, ledger.NetworkKind)
		}
		fi, err := os.Lstat(first)
		if err != nil {
			t.Fatal(err)
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		if ino < last {
			t.Errorf("run %s (inode %d) came after inode %d", rf.ID, ino, last)
		}
		last = ino
	}
}
