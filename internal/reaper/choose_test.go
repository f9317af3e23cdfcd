package reaper_test

import (
	"testing"

	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Which watchdog waits for the owner: the native one where something must
// be held while the owner lives (a backend's claim, the run's local
// processes, a keeper's lease), where it is asked for, and by default on
// Windows, whose script this repository's tests never run, and where no
// shell is there to run the script; the script everywhere else, and where
// it is asked for on Windows.
func TestChoosesNative(t *testing.T) {
	for _, tc := range []struct {
		goos, want           string
		hold, keeper, script bool
		native               bool
	}{
		{"linux", "", false, false, true, false},
		{"darwin", "", false, false, true, false},
		{"linux", "script", false, false, true, false},
		{"linux", "native", false, false, true, true},
		{"linux", "", true, false, true, true},
		{"linux", "script", true, false, true, true},
		{"linux", "", false, true, true, true},
		{"windows", "", false, false, true, true},
		{"windows", "script", false, false, true, false},
		{"windows", "script", true, false, true, true},
		{"windows", "native", false, false, true, true},
		{"linux", "", false, false, false, true},
		{"linux", "script", false, false, false, true},
		{"windows", "script", false, false, false, true},
	} {
		if got := reaper.ChoosesNative(tc.goos, tc.want, tc.hold, tc.keeper, tc.script); got != tc.native {
			t.Errorf("%s, RIGHTSIZE_WATCHDOG=%q, hold %v, keeper %v, shell %v: native %v, want %v", tc.goos, tc.want, tc.hold, tc.keeper, tc.script, got, tc.native)
		}
	}
}
