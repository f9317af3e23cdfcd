package reaper_test

import (
	"testing"

	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Which watchdog a plan that allows the native one gets: the script
// wherever it is the default and can run, the native one where nothing
// else can, where it is asked for, where it holds a keeper's lease, and by
// default on Windows, whose script this repository's tests never run.
func TestChoosesNative(t *testing.T) {
	for _, tc := range []struct {
		goos, want             string
		steps, keeper, capable bool
		native                 bool
	}{
		{"linux", "", true, false, true, false},
		{"darwin", "", true, false, true, false},
		{"linux", "", false, false, true, true},
		{"linux", "native", true, false, true, true},
		{"linux", "", true, true, true, true},
		{"windows", "", true, false, true, true},
		{"windows", "script", true, false, true, false},
		{"windows", "", true, false, false, false},
		{"windows", "native", true, false, false, true},
	} {
		if got := reaper.ChoosesNative(tc.goos, tc.want, tc.steps, tc.keeper, tc.capable); got != tc.native {
			t.Errorf("%s, RIGHTSIZE_WATCHDOG=%q, steps %v, keeper %v, capable %v: native %v, want %v", tc.goos, tc.want, tc.steps, tc.keeper, tc.capable, got, tc.native)
		}
	}
}
