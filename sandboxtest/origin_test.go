package sandboxtest_test

import (
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// next is file:line of the line after its caller's: where the call whose
// origin a test checks is.
func next() string {
	_, file, line, _ := runtime.Caller(1)
	return filepath.Base(file) + ":" + strconv.Itoa(line+1)
}

// startSleeper is a test's helper, marked as one: what it starts is the
// calling test's, at the call of it.
func startSleeper(t *testing.T, img string) *sandboxtest.Guard {
	t.Helper()
	return sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{testimage.ServerPath, "8080"}})
}

// TestOriginLabels: what a test starts carries the test's name and the
// place of its call, as labels on the engine and in the run's origins: a
// Start sandbox (directly, through a helper marked with t.Helper, in a
// subtest), a network, a Track'd container, a local process.
func TestOriginLabels(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	in := r.session()
	img := testimage.Busybox(t)
	want := map[string]origin.Origin{} // by name

	at := next()
	net := sandboxtest.NewNetwork(t)
	want[net.Name()] = origin.Origin{Test: t.Name(), Place: at}
	at = next()
	g := sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{testimage.ServerPath, "8080"}, Networks: []*sandboxtest.Network{net}})
	want[g.Name()] = origin.Origin{Test: t.Name(), Place: at}
	at = next()
	h := startSleeper(t, img)
	want[h.Name()] = origin.Origin{Test: t.Name(), Place: at}
	at = next()
	ctr, err := testcontainers.Run(t.Context(), img, testcontainers.WithCmd(testimage.ServerPath, "8080"), sandboxtest.Track(t))
	if err != nil {
		t.Fatal(err)
	}
	info, err := ctr.Inspect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want[strings.TrimPrefix(info.Name, "/")] = origin.Origin{Test: t.Name(), Place: at}
	t.Run("eu/west 1", func(t *testing.T) {
		at := next()
		g := sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{testimage.ServerPath, "8080"}})
		check(t, r, in, g.Name(), origin.Origin{Test: "TestOriginLabels/eu/west_1", Place: at})
	})
	at = next()
	sandboxtest.StartProcess(t, sleeperCommand())
	proc := origin.Origin{Test: t.Name(), Place: at}

	for name, o := range want {
		check(t, r, in, name, o)
	}
	origins := ledger.ReadOrigins(in.CacheDir, in.RunID)
	lines := sandboxtest.ProcessLines(t)
	if len(lines) == 0 {
		t.Fatal("the run lists no local process")
	}
	found := false
	for _, l := range lines {
		found = found || origins.Of(ledger.ProcessKind, l) == proc
	}
	if !found {
		t.Errorf("no local process of the run %q is said to be made by %+v: %v", lines, proc, origins[ledger.ProcessKind])
	}
}

// check checks that name is labelled, and listed in the run's origins, as
// made by o.
func check(t *testing.T, r *rig, in sandboxtest.Info, name string, o origin.Origin) {
	t.Helper()
	var labels map[string]string
	kind := ledger.SandboxKind
	if c, ok := r.inspect(name); ok {
		labels = c.Config.Labels
	} else if ok, l, _ := r.networkExists(name); ok {
		labels, kind = l, ledger.NetworkKind
	} else {
		t.Errorf("%s is on the engine neither as a container nor as a network", name)
		return
	}
	if got := origin.FromLabels(labels); got != o {
		t.Errorf("%s is labelled as made by %+v, want %+v", name, got, o)
	}
	if got := ledger.ReadOrigins(in.CacheDir, in.RunID).Of(kind, name); got != o {
		t.Errorf("the run's origins say %s %s was made by %+v, want %+v", kind, name, got, o)
	}
}

// TestOriginInStartFailure: a start that fails says what started it.
func TestOriginInStartFailure(t *testing.T) {
	rec := &recordingTB{TB: t}
	var at string
	rec.run(func(tb testing.TB) {
		at = next()
		sandboxtest.Start(tb, sandboxtest.Spec{})
	})
	if want := "(" + t.Name() + " at " + at + ")"; len(rec.fatals) != 1 || !strings.Contains(rec.fatals[0], want) {
		t.Errorf("Start of an empty spec failed with %q, want a message that says %q", rec.fatals, want)
	}
}
