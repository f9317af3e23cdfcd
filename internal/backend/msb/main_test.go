package msb

import (
	"fmt"
	"os"
	"testing"

	"github.com/rightsize/rightsize-go/internal/reaper"
)

// envHelperRole makes this test binary a helper process (TestMsbHelper).
const envHelperRole = "RZ_MSB_HELPER"

// TestMain lets this test binary serve as the watchdog of the owners its
// crash rows start (reaper.WatchdogMain), and gives msb a temporary folder
// of the tests' own: msb 0.6.18 leaves an empty folder in TMPDIR for every
// sandbox made from an image.
func TestMain(m *testing.M) {
	reaper.WatchdogMain()
	if os.Getenv(envHelperRole) != "" {
		os.Exit(m.Run())
	}
	tmp, err := os.MkdirTemp("", "rz-msb-tests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", tmp)
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}
