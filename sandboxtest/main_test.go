package sandboxtest_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// TestMain gives this test binary a cache dir of its own, so that its
// ledger never meets the user's, and fails the run when a test left a
// sandbox or network of this process listed: the product's promise,
// applied to its own tests. sandboxtest.Main then removes any such
// leftover, before the folder goes. The session (backend, sweep, run,
// watchdog) is per process, so this happens before any test touches
// sandboxtest.
//
// Helper processes the tests start (RIGHTSIZE_TEST_KEEP_ENV=1) share their
// parent's cache dir and run as plain test binaries: they are owners the
// tests kill, and must not sweep or close anything on their own.
func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Getenv("RIGHTSIZE_TEST_KEEP_ENV") != "" {
		return m.Run()
	}
	// Ryuk's image cannot be pulled here, and rightsize does not need it.
	// (Helpers inherit it, unless a test takes it away.)
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	dir, err := os.MkdirTemp("", "rightsize-sandboxtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	os.Setenv("RIGHTSIZE_CACHE_DIR", dir)
	flag.Parse()
	if testing.Short() {
		// -short never reaches an engine, whatever the environment names:
		// the session Main sets up is the memory backend's, in dir.
		os.Setenv("RIGHTSIZE_BACKEND", "memory")
	}
	return sandboxtest.RunMain(sandboxtest.Program(func() int {
		code := m.Run()
		if left := ownLeftovers(); left != "" {
			fmt.Fprintf(os.Stderr, "FAIL: the tests left these listed in the ledger: %s\n", left)
			if code == 0 {
				code = 1
			}
		}
		return code
	}))
}

// ownLeftovers is what this process's run still lists after every test ended.
func ownLeftovers() string {
	info, err := sandboxtest.Session(context.Background())
	if err != nil {
		return "" // no engine: the tests that needed one have failed already
	}
	rf, err := ledger.ReadRun(info.CacheDir, info.RunID)
	if err != nil {
		return "" // nothing listed: the run's files were pruned
	}
	l := rf.ReadLists()
	return strings.Join(append(l.Sandboxes, l.Networks...), ", ")
}
