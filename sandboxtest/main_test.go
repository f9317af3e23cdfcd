package sandboxtest_test

import (
	"fmt"
	"os"
	"testing"
)

// TestMain gives this test binary a cache dir of its own, so that its
// ledger never meets the user's, and removes it afterwards. The session
// (backend, sweep, run, watchdog) is per process, so this must happen
// before any test touches sandboxtest.
func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Getenv("RIGHTSIZE_TEST_KEEP_ENV") == "" {
		dir, err := os.MkdirTemp("", "rightsize-sandboxtest-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		os.Setenv("RIGHTSIZE_CACHE_DIR", dir)
	}
	// Ryuk's image cannot be pulled here, and rightsize does not need it.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	return m.Run()
}
