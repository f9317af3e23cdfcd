package reaper_test

import (
	"fmt"
	"testing"

	"github.com/rightsize/rightsize-go/internal/reaper"
)

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   reaper.Mode
		reason string
	}{
		{"on", reaper.On, "the default, spelled out"},
		{"", reaper.On, "unset or empty is the default"},
		{"sweep", reaper.SweepOnly, "ledger and sweep, no watchdog"},
		{"off", reaper.Off, "nothing but the test's own cleanup"},
		{"  off\n", reaper.Off, "trimmed"},
		{"\tSweep ", reaper.SweepOnly, "trimmed, any case"},
		{"OFF", reaper.Off, "any case"},
		{"oFf", reaper.Off, "any case"},
		{"ON", reaper.On, "any case"},
		{"of", reaper.On, "a typo must not disable the backstop"},
		{"false", reaper.On, "not one of the words: on"},
		{"0", reaper.On, "not one of the words: on"},
		{"no", reaper.On, "not one of the words: on"},
		{"sweep-only", reaper.On, "not one of the words: on"},
		{"o ff", reaper.On, "inner space is not trimmed"},
		{"\u00a0off", reaper.Off, "strings.TrimSpace trims Unicode spaces too"},
	} {
		if got := reaper.ParseMode(tc.in); got != tc.want {
			t.Errorf("ParseMode(%q) = %v, want %v: %s", tc.in, got, tc.want, tc.reason)
		}
	}
}

func TestModeFromEnv(t *testing.T) {
	t.Setenv(reaper.EnvReaper, " Sweep")
	if got := reaper.ModeFromEnv(); got != reaper.SweepOnly {
		t.Errorf("%s=' Sweep': %v, want sweep", reaper.EnvReaper, got)
	}
}

func TestModeMeaning(t *testing.T) {
	for _, tc := range []struct {
		m                reaper.Mode
		name             string
		ledger, watchdog bool
	}{
		{reaper.On, "on", true, true},
		{reaper.SweepOnly, "sweep", true, false},
		{reaper.Off, "off", false, false},
	} {
		if tc.m.String() != tc.name || tc.m.Ledger() != tc.ledger || tc.m.Watchdog() != tc.watchdog {
			t.Errorf("%v: String %q Ledger %v Watchdog %v, want %q %v %v", tc.m, tc.m, tc.m.Ledger(), tc.m.Watchdog(), tc.name, tc.ledger, tc.watchdog)
		}
		if reaper.ParseMode(tc.m.String()) != tc.m {
			t.Errorf("ParseMode(%v.String()) is not %v", tc.m, tc.m)
		}
	}
}

func ExampleParseMode() {
	for _, v := range []string{"", " SWEEP ", "off", "of"} {
		fmt.Printf("%q → %v\n", v, reaper.ParseMode(v))
	}
	// Output:
	// "" → on
	// " SWEEP " → sweep
	// "off" → off
	// "of" → on
}
