//go:build linux

package e2e_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
)

// full runs rows 8 and 12 with their full counts (100 sweeping rounds, 200
// random kills); `make e2e` sets it. RIGHTSIZE_E2E_FULL=1 does the same.
var full = flag.Bool("full", false, "run rows 8 and 12 with their full counts (100 rounds, 200 kills)")

func fullCounts() bool {
	if *full {
		return true
	}
	v, _ := strconv.ParseBool(os.Getenv("RIGHTSIZE_E2E_FULL"))
	return v
}

// count is n reduced to short for `make test`, unless -full.
func count(short, n int) int {
	if fullCounts() {
		return n
	}
	return short
}

func TestMain(m *testing.M) {
	// The test process itself starts no sandbox through rightsize; Ryuk
	// off matters to the engine helpers of testcontainers-go it may load.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	if _, ok, err := harness.PlanFromEnv(); ok && err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	if mainFixture.bin != "" { // built once, for every test of the process
		os.RemoveAll(filepath.Dir(mainFixture.bin))
	}
	os.Exit(code)
}

// TestOwner is the owner process of every row: this binary, re-executed
// with a plan in RZ_E2E_PLAN. It does nothing in an ordinary run.
func TestOwner(t *testing.T) {
	p, ok, err := harness.PlanFromEnv()
	if !ok {
		t.Skip("the owner process of the e2e rows; runs only re-executed with " + harness.EnvPlan)
	}
	if err != nil {
		t.Fatal(err)
	}
	harness.Owner(t, p)
}
