package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// benchRuns is how many runs BenchmarkLs writes: 200,000 unless
// RIGHTSIZE_BENCH_RUNS says otherwise.
func benchRuns(b *testing.B) int {
	if s := os.Getenv("RIGHTSIZE_BENCH_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			b.Fatalf("RIGHTSIZE_BENCH_RUNS=%q: want a count", s)
		}
		return n
	}
	return 200_000
}

// writeDeadRuns writes n runs as the other members leave them: a compact
// record each, no line file, the owner's pid above every pid_max (dead),
// named 00000000, 00000001… (hex).
func writeDeadRuns(tb testing.TB, cache string, n int) {
	tb.Helper()
	dir := filepath.Join(cache, "runs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(cache, 0o700); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		rec := fmt.Sprintf(`{"pid":%d,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker"}`, 2147483000-i%1000)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%08x.json", i)), []byte(rec), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkLs measures `rightsize ls` over a ledger of many dead runs
// (200,000 unless RIGHTSIZE_BENCH_RUNS says), its output written to
// /dev/null as a file, so that every write the command makes is a system
// call as on a terminal or a pipe. "table" also asks the engine for its
// keep-alive sandboxes (at most 5 s; at once when none answers).
//
//	go test -run '^$' -bench BenchmarkLs -benchtime 3x ./cmd/rightsize
func BenchmarkLs(b *testing.B) {
	cache := b.TempDir()
	writeDeadRuns(b, cache, benchRuns(b))
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devNull.Close()
	for _, mode := range []struct {
		name string
		args []string
	}{{"table", nil}, {"json", []string{"--json"}}} {
		b.Run(mode.name, func(b *testing.B) {
			args := append([]string{"ls", "--cache", cache}, mode.args...)
			for b.Loop() {
				if code := run(args, devNull, io.Discard); code != 0 {
					b.Fatalf("rightsize ls exited %d", code)
				}
			}
		})
	}
}

// TestLsManyRuns lists thousands of runs, some with names, as a table, as
// -v and as JSON: one row each, in order, the JSON streamed exactly as
// the encoder of the whole array would write it.
func TestLsManyRuns(t *testing.T) {
	const n = 3000
	cache := t.TempDir()
	writeDeadRuns(t, cache, n)
	runs := filepath.Join(cache, ledger.RunsDir)
	for _, id := range []string{"00000007", "00000a00"} {
		if err := os.WriteFile(filepath.Join(runs, id+".sandboxes"), []byte("rz-"+id+"-1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// No engine is asked: none is named.
	t.Setenv("RIGHTSIZE_BACKEND", "no-such-backend")

	var out, errs bytes.Buffer
	if code := run([]string{"ls", "--cache", cache}, &out, &errs); code != 0 {
		t.Fatalf("ls exited %d: %s", code, errs.String())
	}
	lines := strings.Split(out.String(), "\n")
	if got := lines[0]; !strings.HasPrefix(got, "RUN ") {
		t.Fatalf("first line %q, want the header", got)
	}
	for i := range n {
		if want := fmt.Sprintf("%08x ", i); !strings.HasPrefix(lines[1+i], want) {
			t.Fatalf("row %d is %q, want run %s", i, lines[1+i], want)
		}
	}
	if !strings.Contains(lines[1+7], "  1  ") {
		t.Errorf("row of 00000007 (one sandbox) is %q", lines[1+7])
	}
	if rest := strings.Join(lines[1+n:], "\n"); !strings.Contains(rest, "no keep-alive sandboxes") || !strings.Contains(rest, "no-such-backend") {
		t.Errorf("after the table:\n%s\nwant the keep-alive section, and why the engine could not be asked", rest)
	}

	out.Reset()
	if code := run([]string{"ls", "-v", "--cache", cache}, &out, &errs); code != 0 {
		t.Fatalf("ls -v exited %d: %s", code, errs.String())
	}
	if got := strings.Count(out.String(), "  (no names)\n"); got != n-2 {
		t.Errorf("ls -v: %d runs without names, want %d", got, n-2)
	}
	if !strings.Contains(out.String(), "\n00000a00\n  sandbox  rz-00000a00-1\n") {
		t.Errorf("ls -v does not list the names of 00000a00")
	}

	// The streamed array is byte for byte what encoding the whole array
	// wrote before ls streamed.
	now := time.Now()
	scan, err := ledger.ScanRuns(cache)
	if err != nil {
		t.Fatal(err)
	}
	var streamed bytes.Buffer
	w := bufio.NewWriter(&streamed)
	if err := writeRunsJSON(w, scan, now); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	again, err := ledger.ScanRuns(cache)
	if err != nil {
		t.Fatal(err)
	}
	rows := []lsRun{}
	again.Each(func(rf ledger.RunFiles) error { rows = append(rows, describeRun(rf, now)); return nil })
	var whole bytes.Buffer
	enc := json.NewEncoder(&whole)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rows); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(streamed.Bytes(), whole.Bytes()) {
		t.Fatalf("streamed JSON differs from the encoded array (%d and %d bytes)", streamed.Len(), whole.Len())
	}

	// And with no runs: [] as before.
	streamed.Reset()
	empty, err := ledger.ScanRuns(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w = bufio.NewWriter(&streamed)
	if err := writeRunsJSON(w, empty, now); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if got := streamed.String(); got != "[]\n" {
		t.Fatalf("no runs: %q, want \"[]\\n\"", got)
	}
}

// TestEachAheadStops: ls's walk is in run id order; the first error of fn
// ends it and is returned; the reader, a batch ahead, stops too.
func TestEachAheadStops(t *testing.T) {
	cache := t.TempDir()
	writeDeadRuns(t, cache, 2000)
	scan, err := ledger.ScanRuns(cache)
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("enough")
	seen := 0
	err = scan.EachAhead(false, func(rf ledger.RunFiles) error {
		if want := fmt.Sprintf("%08x", seen); rf.ID != want {
			t.Fatalf("run %d is %s, want %s: out of order", seen, rf.ID, want)
		}
		if seen++; seen == 700 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || seen != 700 {
		t.Fatalf("EachAhead = %v after %d runs, want %v after 700", err, seen, stop)
	}
}
