package kubernetes_test

import (
	"os"
	"testing"

	"github.com/rightsize/rightsize-go/internal/reaper"
)

// TestMain lets this test binary serve as its own native watchdog, which
// is the only kind the kubernetes backend has.
func TestMain(m *testing.M) {
	reaper.WatchdogMain()
	os.Exit(m.Run())
}
