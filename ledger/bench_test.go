package ledger_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/rightsize/rightsize-go/ledger"
)

// One AddSandbox + RemoveSandbox pair per op. "kept": another sandbox keeps
// the run's files, so the pair is an append and a rewrite of .sandboxes.
// "prune": the pair empties the run, so every op also deletes all three
// files and rewrites the record on the next add.
func BenchmarkAppendRemove(b *testing.B) {
	for _, keep := range []bool{true, false} {
		name := "prune"
		if keep {
			name = "kept"
		}
		b.Run(name, func(b *testing.B) {
			r, err := ledger.NewRun(b.TempDir(), ledger.Owner{Backend: "docker"})
			if err != nil {
				b.Fatal(err)
			}
			if keep {
				if err := r.Add(ledger.SandboxKind, "rz-keeper"); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if err := r.Add(ledger.SandboxKind, "rz-churn"); err != nil {
					b.Fatal(err)
				}
				if err := r.Remove(ledger.SandboxKind, "rz-churn"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A process's first sandbox, as the ledger sees it: the run made, then its
// record and first line written.
func BenchmarkFirstAdd(b *testing.B) {
	cache := b.TempDir()
	for b.Loop() {
		r, err := ledger.NewRun(cache, ledger.Owner{Backend: "docker", Endpoint: "unix:///var/run/docker.sock"})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Add(ledger.SandboxKind, "rz-"+r.ID()+"-1"); err != nil {
			b.Fatal(err)
		}
	}
}

// Liveness of the record of a live process (this one, as written by Go).
func BenchmarkJudge(b *testing.B) {
	r, err := ledger.NewRun(b.TempDir(), ledger.Owner{Backend: "docker"})
	if err != nil {
		b.Fatal(err)
	}
	rec := r.Record()
	if l := ledger.Judge(rec); l.State != ledger.Alive {
		b.Fatalf("Judge(own record) = %v", l)
	}
	for b.Loop() {
		ledger.Judge(rec)
	}
}

// Liveness of a record whose pid no process has (above every pid_max).
func BenchmarkJudgeDead(b *testing.B) {
	rec := ledger.Record{PID: 2147483646, StartedISO: "2026-11-29T20:36:06.950Z", Backend: "docker"}
	if l := ledger.Judge(rec); l.State != ledger.Dead {
		b.Fatalf("Judge(no such pid) = %v", l)
	}
	for b.Loop() {
		ledger.Judge(rec)
	}
}

// ListRuns over 1000 runs, each a Go record and a .sandboxes file.
func BenchmarkListRuns1000(b *testing.B) {
	cache := b.TempDir()
	runs, err := ledger.EnsureSubdir(cache, ledger.RunsDir)
	if err != nil {
		b.Fatal(err)
	}
	rec := ledger.Record{PID: 4242, StartedISO: "2026-11-29T20:30:38.120Z", Backend: "docker", StartTicks: 6394612,
		BootID: "b3e3261a-ab18-4769-97ff-640f9b9a701d", PidNamespace: "pid:[4026531836]", Endpoint: "unix:///var/run/docker.sock", Writer: "go"}
	for i := range 1000 {
		id := fmt.Sprintf("%08x", i)
		p, sbx, _ := ledger.Paths(runs, id)
		if err := os.WriteFile(p, rec.Marshal(), 0o600); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(sbx, []byte("rz-"+id+"-1\nrz-"+id+"-2\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	if got, err := ledger.ListRuns(cache); err != nil || len(got) != 1000 {
		b.Fatalf("ListRuns: %d runs, %v", len(got), err)
	}
	for b.Loop() {
		if _, err := ledger.ListRuns(cache); err != nil {
			b.Fatal(err)
		}
	}
}
