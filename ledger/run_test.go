package ledger_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rightsize/rightsize-go/ledger"
)

func newRun(tb testing.TB, o ledger.Owner) (*ledger.Run, string) {
	tb.Helper()
	cache := filepath.Join(tb.TempDir(), "rightsize") // made by NewRun
	r, err := ledger.NewRun(cache, o)
	if err != nil {
		tb.Fatal(err)
	}
	return r, cache
}

func exists(tb testing.TB, p string) bool {
	tb.Helper()
	_, err := os.Lstat(p)
	if err == nil {
		return true
	}
	if !errors.Is(err, fs.ErrNotExist) {
		tb.Fatal(err)
	}
	return false
}

func readLinesOK(tb testing.TB, p string) []string {
	tb.Helper()
	names, rejected, err := readLines3(p)
	if err != nil || len(rejected) != 0 {
		tb.Fatalf("ReadLines(%s): rejected %v, err %v", p, rejected, err)
	}
	return names
}

func readRecordOK(tb testing.TB, p string) ledger.Record {
	tb.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := ledger.ParseRecord(b)
	if err != nil {
		tb.Fatalf("ParseRecord(%s): %v\n%s", p, err, b)
	}
	return r
}

var runIDPattern = regexp.MustCompile(`^[0-9a-f]{8}$`)

func TestNewRunID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, err := ledger.NewRunID()
		if err != nil {
			t.Fatal(err)
		}
		if !runIDPattern.MatchString(id) {
			t.Fatalf("NewRunID = %q, want 8 lowercase hex characters", id)
		}
		seen[id] = true
	}
	if len(seen) < 99 {
		t.Errorf("100 run ids gave only %d distinct ones: not random", len(seen))
	}
}

func TestRunLifecycle(t *testing.T) {
	o := ledger.Owner{Backend: "docker", Endpoint: "unix:///var/run/docker.sock", MsbPath: "/ignored/for/docker", DefaultEngine: true}
	r, cache := newRun(t, o)
	runs := filepath.Join(cache, ledger.RunsDir)
	if r.RunsDir() != runs || !runIDPattern.MatchString(r.ID()) {
		t.Fatalf("RunsDir %q ID %q", r.RunsDir(), r.ID())
	}
	if r.Family() != ledger.FamilyJudges(o) {
		t.Errorf("Family() = %v, FamilyJudges = %v", r.Family(), ledger.FamilyJudges(o))
	}
	_, sbx, nets := ledger.Paths(runs, r.ID())
	rec := ledger.OwnRecordPath(runs, r.ID())
	fam := ledger.RecordPath(runs, r.ID())
	if exists(t, rec) || exists(t, fam) || exists(t, sbx) || exists(t, nets) {
		t.Fatal("NewRun wrote files before the first name: a run that never starts a sandbox must leave nothing")
	}

	if err := r.Add(ledger.SandboxKind, "rz-"+r.ID()+"-1"); err != nil {
		t.Fatal(err)
	}
	if r.Family() {
		// The family's record is Go's own, byte for byte.
		a, _ := os.ReadFile(rec)
		b, _ := os.ReadFile(fam)
		if !bytes.Equal(a, b) {
			t.Errorf("%s holds %q, %s %q: want the same record", filepath.Base(rec), a, filepath.Base(fam), b)
		}
	} else if exists(t, fam) {
		t.Errorf("%s written where the other members cannot judge the run", fam)
	}
	got := readRecordOK(t, rec)
	if got.PID != os.Getpid() || got.Backend != "docker" || got.Writer != "go" || got.Endpoint != "unix:///var/run/docker.sock" {
		t.Errorf("record %+v: want this pid, docker, writer go, the endpoint", got)
	}
	if got.MsbPath != "" {
		t.Errorf("docker record has msbPath %q: msbPath is only for msb", got.MsbPath)
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(got.StartedISO) {
		t.Errorf("startedIso %q: want UTC with milliseconds", got.StartedISO)
	}
	if runtime.GOOS == "linux" && (got.StartTicks == 0 || got.BootID == "" || got.PidNamespace == "") {
		t.Errorf("record %+v lacks the Go identity fields on Linux", got)
	}
	if got != r.Record() {
		t.Errorf("record on disk %+v differs from Run.Record %+v", got, r.Record())
	}
	if l := ledger.Judge(got); l.State != ledger.Alive {
		t.Errorf("Judge(own record) = %v: the record must identify this process", l)
	}

	if err := r.Add(ledger.NetworkKind, "rz-net-0badcafe"); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(ledger.SandboxKind, "rz-"+r.ID()+"-2"); err != nil {
		t.Fatal(err)
	}
	if n := readLinesOK(t, sbx); !slices.Equal(n, []string{"rz-" + r.ID() + "-1", "rz-" + r.ID() + "-2"}) {
		t.Errorf(".sandboxes = %q", n)
	}
	if n := readLinesOK(t, nets); !slices.Equal(n, []string{"rz-net-0badcafe"}) {
		t.Errorf(".networks = %q", n)
	}
	if b, _ := os.ReadFile(sbx); !strings.HasSuffix(string(b), "\n") {
		t.Errorf(".sandboxes %q: every line ends in \\n", b)
	}

	// Removing an unknown name is a no-op, not an error.
	if err := r.Remove(ledger.SandboxKind, "rz-never-added"); err != nil {
		t.Errorf("RemoveSandbox(unknown) = %v", err)
	}
	// Invalid names are never written.
	for _, bad := range []string{"", "-rf", "a\nb", "$(x)"} {
		if err := r.Add(ledger.SandboxKind, bad); err == nil {
			t.Errorf("AddSandbox(%q) succeeded: only valid names may reach the ledger", bad)
		}
	}
	if n := readLinesOK(t, sbx); len(n) != 2 {
		t.Errorf(".sandboxes = %q after invalid adds", n)
	}

	if err := r.Remove(ledger.SandboxKind, "rz-"+r.ID()+"-1"); err != nil {
		t.Fatal(err)
	}
	if n := readLinesOK(t, sbx); !slices.Equal(n, []string{"rz-" + r.ID() + "-2"}) {
		t.Errorf(".sandboxes after removal = %q", n)
	}
	if err := r.Remove(ledger.SandboxKind, "rz-"+r.ID()+"-2"); err != nil {
		t.Fatal(err)
	}
	if exists(t, sbx) {
		t.Error(".sandboxes still there with no sandbox left")
	}
	if !exists(t, rec) || !exists(t, nets) || r.Family() && !exists(t, fam) {
		t.Error("record or .networks removed while a network is still listed")
	}
	if err := r.Remove(ledger.NetworkKind, "rz-net-0badcafe"); err != nil {
		t.Fatal(err)
	}
	if exists(t, rec) || exists(t, fam) || exists(t, sbx) || exists(t, nets) {
		t.Error("both lists empty but files remain: all must be pruned")
	}
	if len(r.Names(ledger.SandboxKind)) != 0 || len(r.Names(ledger.NetworkKind)) != 0 {
		t.Errorf("in-memory lists %q %q after pruning", r.Names(ledger.SandboxKind), r.Names(ledger.NetworkKind))
	}

	// The next name recreates the record (Node forgets to: not copied).
	if err := r.Add(ledger.NetworkKind, "rz-net-12345678"); err != nil {
		t.Fatal(err)
	}
	if got := readRecordOK(t, rec); got != r.Record() {
		t.Errorf("record after recreation %+v, want %+v", got, r.Record())
	}
	if r.Family() {
		if got := readRecordOK(t, fam); got != r.Record() {
			t.Errorf("family record after recreation %+v, want %+v", got, r.Record())
		}
	}
	if n := readLinesOK(t, nets); !slices.Equal(n, []string{"rz-net-12345678"}) {
		t.Errorf(".networks = %q", n)
	}
	entries, _ := os.ReadDir(runs)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestRunMsbRecord(t *testing.T) {
	tests := []struct {
		owner  ledger.Owner
		want   string
		path   string
		reason string
	}{
		{ledger.Owner{Backend: "msb", MsbPath: "/usr/local/bin/msb"}, "msb", "/usr/local/bin/msb", "msb records its binary"},
		{ledger.Owner{Backend: "microsandbox", MsbPath: "/usr/local/bin/msb"}, "msb", "/usr/local/bin/msb", `Go writes "msb", never Rust's "microsandbox" (Node would reject it)`},
	}
	for _, tc := range tests {
		r, _ := newRun(t, tc.owner)
		if err := r.Add(ledger.SandboxKind, "rz-1"); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(ledger.OwnRecordPath(r.RunsDir(), r.ID()))
		if !strings.Contains(string(b), `"backend":"`+tc.want+`","msbPath":"`+tc.path+`"`) {
			t.Errorf("record %s: want backend %q then msbPath %q (%s)", b, tc.want, tc.path, tc.reason)
		}
	}
}

func TestRunFileModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits are not Windows' access control")
	}
	r, cache := newRun(t, ledger.Owner{Backend: "docker", DefaultEngine: true})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.Add(ledger.SandboxKind, "rz-1"))
	must(r.Add(ledger.SandboxKind, "rz-2"))
	must(r.Add(ledger.NetworkKind, "rz-net-1"))
	must(r.Add(ledger.NetworkKind, "rz-net-2"))
	rec, sbx, nets := ledger.Paths(r.RunsDir(), r.ID())
	files := []string{ledger.OwnRecordPath(r.RunsDir(), r.ID()), sbx, nets}
	if r.Family() {
		files = append(files, rec)
	}
	check := func(when string) {
		t.Helper()
		for _, p := range files {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s %s: mode %v, want 0600", when, filepath.Base(p), fi.Mode().Perm())
			}
		}
	}
	check("after appends")
	must(r.Remove(ledger.SandboxKind, "rz-1")) // rewritten through a temporary file
	must(r.Remove(ledger.NetworkKind, "rz-net-1"))
	check("after rewrites")
	for _, d := range []string{cache, r.RunsDir()} {
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
}

// A symbolic link planted at a line file's name is not written through.
func TestRunRefusesSymlinkedLineFile(t *testing.T) {
	r, _ := newRun(t, ledger.Owner{Backend: "docker"})
	target := filepath.Join(t.TempDir(), "victim")
	writeFile(t, target, []byte("precious\n"))
	_, sbx, _ := ledger.Paths(r.RunsDir(), r.ID())
	symlinkOrSkip(t, target, sbx)
	if err := r.Add(ledger.SandboxKind, "rz-1"); err == nil {
		t.Error("AddSandbox wrote through a symbolic link")
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Errorf("link target changed to %q", b)
	}
}

// 50 goroutines add and remove their own names on one Run while a reader
// lists the folder: no lost or duplicated line, files always parseable,
// everything pruned at the end. Plain goroutines rather than t.Parallel
// subtests, which -parallel (GOMAXPROCS by default) would cap at two.
func TestRunConcurrent(t *testing.T) {
	const workers, rounds = 50, 12
	r, cache := newRun(t, ledger.Owner{Backend: "docker"})
	sb := func(g, i int) string { return fmt.Sprintf("rz-%s-g%02d-%03d", r.ID(), g, i) }
	nw := func(g, i int) string { return fmt.Sprintf("rz-net-g%02d-%03d", g, i) }
	isOurs := regexp.MustCompile(`^rz-(` + r.ID() + `|net)-g\d\d-\d{3}$`)

	stop := make(chan struct{})
	var reads atomic.Int64
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			runs, err := ledger.ListRuns(cache)
			if err != nil {
				t.Errorf("ListRuns: %v", err)
				return
			}
			for _, rf := range runs {
				if rf.ID != r.ID() {
					t.Errorf("ListRuns found run %q; only %q exists", rf.ID, r.ID())
				}
				// A file may vanish between the listing and its read (a
				// prune), and the listing may see a line file without its
				// record (readdir is not a snapshot): neither is a torn file.
				if rf.RecordErr != nil && !errors.Is(rf.RecordErr, ledger.ErrNoRecord) && !errors.Is(rf.RecordErr, fs.ErrNotExist) {
					t.Errorf("record unreadable mid-run: %v", rf.RecordErr)
				}
				if rf.RecordErr == nil && rf.Record != r.Record() {
					t.Errorf("record read as %+v", rf.Record)
				}
				l := rf.ReadLists()
				if len(l.Rejected) != 0 || len(l.Problems) != 0 {
					t.Errorf("lists mid-run: rejected %v problems %v", l.Rejected, l.Problems)
				}
				for _, n := range append(l.Sandboxes, l.Networks...) {
					if !isOurs.MatchString(n) {
						t.Errorf("list holds %q, which no worker wrote", n)
					}
				}
			}
			reads.Add(1)
		}
	}()

	// phase runs body in every worker, all released at once.
	phase := func(body func(g int) error) {
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for g := range workers {
			wg.Go(func() {
				<-gate
				if err := body(g); err != nil {
					t.Error(err)
				}
			})
		}
		close(gate)
		wg.Wait()
	}

	// Phase 1: each worker adds rounds sandboxes and networks and removes
	// some of them at once; it keeps sandboxes i%3==0 and networks i%2==1.
	phase(func(g int) error {
		for i := range rounds {
			if err := r.Add(ledger.SandboxKind, sb(g, i)); err != nil {
				return err
			}
			if err := r.Add(ledger.NetworkKind, nw(g, i)); err != nil {
				return err
			}
			if i%3 != 0 {
				if err := r.Remove(ledger.SandboxKind, sb(g, i)); err != nil {
					return err
				}
			}
			if i%2 == 0 {
				if err := r.Remove(ledger.NetworkKind, nw(g, i)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	var wantSb, wantNw []string
	for g := range workers {
		for i := range rounds {
			if i%3 == 0 {
				wantSb = append(wantSb, sb(g, i))
			}
			if i%2 == 1 {
				wantNw = append(wantNw, nw(g, i))
			}
		}
	}
	slices.Sort(wantSb)
	slices.Sort(wantNw)
	_, sbxPath, netsPath := ledger.Paths(r.RunsDir(), r.ID())
	rec := ledger.OwnRecordPath(r.RunsDir(), r.ID())
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		{"in-memory sandboxes", sorted(r.Names(ledger.SandboxKind)), wantSb},
		{".sandboxes", sorted(readLinesOK(t, sbxPath)), wantSb},
		{"in-memory networks", sorted(r.Names(ledger.NetworkKind)), wantNw},
		{".networks", sorted(readLinesOK(t, netsPath)), wantNw},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s after phase 1: %d names, want %d (lost or duplicated lines)\n got %q\nwant %q", c.what, len(c.got), len(c.want), c.got, c.want)
		}
	}
	readRecordOK(t, rec)

	// Phase 2: each worker removes what it kept, then churns one name of
	// its own, so the lists empty and refill many times (prune, recreate).
	phase(func(g int) error {
		for i := range rounds {
			if i%3 == 0 {
				if err := r.Remove(ledger.SandboxKind, sb(g, i)); err != nil {
					return err
				}
			}
			if i%2 == 1 {
				if err := r.Remove(ledger.NetworkKind, nw(g, i)); err != nil {
					return err
				}
			}
		}
		for range rounds {
			if err := r.Add(ledger.SandboxKind, sb(g, 999)); err != nil {
				return err
			}
			if err := r.Remove(ledger.SandboxKind, sb(g, 999)); err != nil {
				return err
			}
		}
		return nil
	})
	close(stop)
	<-readerDone
	if reads.Load() == 0 {
		t.Error("the reader never completed a pass")
	}
	if len(r.Names(ledger.SandboxKind)) != 0 || len(r.Names(ledger.NetworkKind)) != 0 {
		t.Errorf("in-memory lists not empty at the end: %q %q", r.Names(ledger.SandboxKind), r.Names(ledger.NetworkKind))
	}
	entries, err := os.ReadDir(r.RunsDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("%s left in runs/ after every name was removed: the run must be pruned", e.Name())
	}
	t.Logf("reader passes: %d", reads.Load())
}
