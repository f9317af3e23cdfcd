package ledger_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/origin"
)

// TestOriginsWithTheLines: what made each name is in the run's origins,
// a file of Go's own outside the runs folder, written before the line and
// gone with the run's files.
func TestOriginsWithTheLines(t *testing.T) {
	r, cache := newRun(t, ledger.Owner{Backend: "docker"})
	eu := origin.Origin{Test: "TestCheckout/eu", Place: "store_test.go:42"}
	setup := origin.Setup("TestMain", "main_test.go:12")
	if err := r.AddFrom(ledger.SandboxKind, "rz-x-1", eu); err != nil {
		t.Fatal(err)
	}
	if err := r.AddFrom(ledger.NetworkKind, "rz-net-12345678", setup); err != nil {
		t.Fatal(err)
	}
	if err := r.AddFrom(ledger.ProcessKind, "p1.4242", eu); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(ledger.SandboxKind, "rz-x-2"); err != nil {
		t.Fatal(err)
	}
	got := ledger.ReadOrigins(cache, r.ID())
	for _, c := range []struct {
		k    ledger.Kind
		name string
		want origin.Origin
	}{
		{ledger.SandboxKind, "rz-x-1", eu},
		{ledger.NetworkKind, "rz-net-12345678", setup},
		{ledger.ProcessKind, "p1.4242", eu},
		{ledger.ProcessKind, "p1.4242.777.123456", eu}, // its line once started
		{ledger.ProcessKind, "p1.42421", origin.Origin{}},
		{ledger.SandboxKind, "rz-x-2", origin.Origin{}},
	} {
		if o := got.Of(c.k, c.name); o != c.want {
			t.Errorf("read back: %s %s = %+v, want %+v", c.k, c.name, o, c.want)
		}
		if o := r.Origin(c.k, c.name); o != c.want {
			t.Errorf("the run's own: %s %s = %+v, want %+v", c.k, c.name, o, c.want)
		}
	}
	ents, err := os.ReadDir(cache + "/runs")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(readFileOK(t, cache+"/runs/"+e.Name()), "TestCheckout") {
			t.Errorf("runs/%s holds the test: the runs folder is the family's", e.Name())
		}
	}
	for _, k := range []ledger.Kind{ledger.SandboxKind, ledger.NetworkKind, ledger.ProcessKind} {
		for _, n := range r.Names(k) {
			if err := r.Remove(k, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	if exists(t, ledger.OriginsPath(cache, r.ID())) {
		t.Error("the origins stay after the run's lists emptied")
	}
}

func readFileOK(tb testing.TB, p string) string {
	tb.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// TestOriginsUnreadable: what cannot be read is not told.
func TestOriginsUnreadable(t *testing.T) {
	cache := t.TempDir()
	if _, err := ledger.EnsureSubdir(cache, ledger.FatesDir); err != nil {
		t.Fatal(err)
	}
	body := "not json\n" +
		`{"kind":"sandbox","name":"rz-a-1","test":"TestA","place":"a_test.go:1"}` + "\n" +
		`{"kind":"spaceship","name":"rz-a-2","test":"TestB"}` + "\n" +
		`{"kind":"sandbox","name":"rz-a-1","test":"TestA2"}` + "\n" +
		`{"kind":"sandbox","test":"TestNameless"}` + "\n"
	if err := os.WriteFile(ledger.OriginsPath(cache, "a"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	got := ledger.ReadOrigins(cache, "a")
	if o := got.Of(ledger.SandboxKind, "rz-a-1"); o != (origin.Origin{Test: "TestA2"}) {
		t.Errorf("rz-a-1 = %+v, want the later line's", o)
	}
	if n := len(got[ledger.SandboxKind]); n != 1 {
		t.Errorf("%d sandboxes read, want 1: %v", n, got)
	}
	if o := ledger.ReadOrigins(cache, "../a").Of(ledger.SandboxKind, "rz-a-1"); !o.IsZero() {
		t.Errorf("a run id that is a path read %+v", o)
	}
}

// TestPruneOrigins: origins left by a reaper that died go with the owner
// stubs, an hour after, once their run has no files.
func TestPruneOrigins(t *testing.T) {
	r, cache := newRun(t, ledger.Owner{Backend: "docker"})
	if err := r.AddFrom(ledger.SandboxKind, "rz-x-1", origin.Origin{Test: "TestX"}); err != nil {
		t.Fatal(err)
	}
	gone := ledger.OriginsPath(cache, "gone0001")
	if err := os.WriteFile(gone, []byte(`{"kind":"sandbox","name":"rz-gone0001-1","test":"TestY"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{gone, ledger.OriginsPath(cache, r.ID())} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	ledger.PruneFates(cache, time.Now())
	if exists(t, gone) {
		t.Error("the origins of a run with no files stayed")
	}
	if !exists(t, ledger.OriginsPath(cache, r.ID())) {
		t.Error("the origins of a live run were pruned")
	}
}
