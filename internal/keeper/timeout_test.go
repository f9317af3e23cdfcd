package keeper

import (
	"strings"
	"testing"
	"time"
)

func TestLeaseTimeout(t *testing.T) {
	for _, tc := range []struct {
		env    string
		want   time.Duration
		bad    bool
		reason string
	}{
		{"", DefaultLeaseTimeout, false, "unset is the default"},
		{"  ", DefaultLeaseTimeout, false, "blank is unset"},
		{"10s", 10 * time.Second, false, "a Go duration"},
		{"1500ms", 1500 * time.Millisecond, false, "a Go duration under a second's unit"},
		{"3", 3 * time.Second, false, "a number of seconds"},
		{"2.5", 2500 * time.Millisecond, false, "a fraction of seconds"},
		{"1h", time.Hour, false, "the longest"},
		{"1s", time.Second, false, "the shortest"},
		{"999ms", 0, true, "shorter than a second"},
		{"0", 0, true, "zero"},
		{"-5", 0, true, "negative"},
		{"2h", 0, true, "longer than an hour"},
		{"1e300", 0, true, "a number of seconds no duration holds"},
		{"NaN", 0, true, "not a number"},
		{"soon", 0, true, "not a duration"},
	} {
		t.Setenv(EnvLeaseTimeout, tc.env)
		got, err := LeaseTimeout()
		switch {
		case tc.bad && err == nil:
			t.Errorf("%s=%q gave %s; want an error: %s", EnvLeaseTimeout, tc.env, got, tc.reason)
		case tc.bad && !strings.Contains(err.Error(), EnvLeaseTimeout):
			t.Errorf("the error %q does not name %s", err, EnvLeaseTimeout)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("%s=%q gave %s, %v; want %s: %s", EnvLeaseTimeout, tc.env, got, err, tc.want, tc.reason)
		}
	}
}

// Heartbeats come often enough that a few late ones never end a lease.
func TestHeartbeatEvery(t *testing.T) {
	for _, timeout := range []time.Duration{time.Second, 2 * time.Second, 10 * time.Second, time.Hour} {
		if every := heartbeatEvery(timeout); every > timeout/5 || every > time.Second || every <= 0 {
			t.Errorf("a lease of %s gets a heartbeat every %s", timeout, every)
		}
	}
}
