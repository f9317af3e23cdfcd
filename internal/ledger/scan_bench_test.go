package ledger_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// The pieces a sweep or `rightsize ls` pays for each run of a large
// ledger (reaper's BenchmarkSweepManyDead measures the whole):
//
//	go test -run '^$' -bench 'Parse|ReadRun|Scan' -benchmem ./internal/ledger

var goRecord = ledger.Record{PID: 4242, StartedISO: "2026-11-29T20:30:38.120Z", Backend: "docker", StartTicks: 6394612,
	BootID: "b3e3261a-ab18-4769-97ff-640f9b9a701d", PidNamespace: "pid:[4026531836]", Endpoint: "unix:///var/run/docker.sock", Writer: "go"}

// BenchmarkParseRecord: a record as rightsize-go writes it, and as Node
// and Kotlin (compact) and Rust (pretty-printed) write theirs.
func BenchmarkParseRecord(b *testing.B) {
	for _, c := range []struct{ name, data string }{
		{"go", string(goRecord.Marshal())},
		{"node", `{"pid":4242,"startedIso":"2026-11-29T20:30:38.120Z","backend":"docker"}`},
		{"rust", "{\n  \"pid\": 4242,\n  \"startedIso\": \"2026-11-29T20:30:38Z\",\n  \"backend\": \"docker\"\n}"},
	} {
		b.Run(c.name, func(b *testing.B) {
			data := []byte(c.data)
			for b.Loop() {
				if _, err := ledger.ParseRecord(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScanEach: listing, then reading every record of, 10,000 runs
// with no line file.
func BenchmarkScanEach(b *testing.B) {
	const n = 10_000
	cache := b.TempDir()
	runs, err := ledger.EnsureSubdir(cache, ledger.RunsDir)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(ledger.RecordPath(runs, fmt.Sprintf("%08x", i)), goRecord.Marshal(), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		s, err := ledger.ScanRuns(cache)
		if err != nil {
			b.Fatal(err)
		}
		seen := 0
		err = s.Each(func(rf ledger.RunFiles) error {
			if rf.RecordErr != nil {
				return rf.RecordErr
			}
			seen++
			return nil
		})
		if err != nil || seen != n {
			b.Fatalf("%d of %d runs read, err %v", seen, n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/run")
}
