package reaper_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/memory"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// noLabels is the memory backend seen through the Driver interface alone:
// no RunLister, as msb, which lists nothing by label.
type noLabels struct{ backend.Driver }

// testNoLabels names it for the watchdog, which opens its backend by name.
const testNoLabels = "test-nolabels"

func init() {
	backend.RegisterEndpoint(testNoLabels, func(string) (backend.Driver, error) {
		d, err := memory.Open("")
		return noLabels{d}, err
	})
}

// On a backend that lists nothing by label (msb), the watchdog removes the names it was
// told, as told, by name: a name untold again stays, a sandbox of the run
// never told stays (nothing finds it by a mark), a keep-alive stays; with
// everything told removed, the run's files go.
func TestWatchdogWithoutLabelsRemovesToldNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "engine")
	t.Setenv(memory.EnvDir, dir)
	t.Setenv("RIGHTSIZE_WATCHDOG_SETTLE", "0")
	d, err := memory.Open(dir)
	must(t, err)
	if _, ok := d.(backend.RunLister); !ok {
		t.Fatal("the memory backend is a RunLister: this test hides it")
	}
	if _, ok := any(noLabels{d}).(backend.RunLister); ok {
		t.Fatal("noLabels is a RunLister: this test proves nothing")
	}
	const run = "0000dd01"
	ctx := context.Background()
	for _, n := range []string{"rz-0000dd01-1", "rz-0000dd01-2", "rz-0000dd01-3"} {
		_, err := d.Create(ctx, n, backend.Spec{Image: "busybox", RunID: run})
		must(t, err)
	}
	keep := "rz-reuse-0123456789ab"
	_, err = d.Create(ctx, keep, backend.Spec{Image: "busybox", KeepAlive: "0123456789ab"})
	must(t, err)

	cache := t.TempDir()
	runs := runsDir(t, cache)
	writeRun(t, runs, run, []byte(`{"pid":1,"startedIso":"","backend":"msb"}`), []string{"rz-0000dd01-1", "rz-0000dd01-2"}, nil)
	told := strings.Join([]string{
		"+s rz-0000dd01-1 rz-0000dd01-1",
		"+s rz-0000dd01-2 rz-0000dd01-2",
		"-s rz-0000dd01-2 rz-0000dd01-2",
		"+s " + keep + " " + keep,
	}, "\n") + "\n"
	if code := reaper.RunScriptWatchdog(strings.NewReader(told), runs, run, testNoLabels, ""); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var left []string
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			left = append(left, e.Name())
		}
	}
	want := []string{"sandbox.rz-0000dd01-2.json", "sandbox.rz-0000dd01-3.json", "sandbox." + keep + ".json"}
	slices.Sort(left)
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("left on the engine %q, want %q", left, want)
	}
	if ledger.HasFiles(runs, run) {
		t.Errorf("the run's files stay (%q), though everything told was removed or is not the run's", listDir(t, runs))
	}
}
