package keeper

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	// EnvLeaseTimeout is how long a keeper waits for a heartbeat before
	// it takes its holder, or the holder's machine, for dead: a Go
	// duration ("10s", "1500ms") or a number of seconds ("10", "2.5").
	EnvLeaseTimeout = "RIGHTSIZE_LEASE_TIMEOUT"
	// DefaultLeaseTimeout is the lease timeout when none is set.
	DefaultLeaseTimeout = 10 * time.Second

	// A shorter lease would end under a loaded machine's pauses; a
	// longer one would leave a dead machine's sandboxes running for more
	// than an hour.
	minLeaseTimeout = time.Second
	maxLeaseTimeout = time.Hour
)

// LeaseTimeout returns the lease timeout RIGHTSIZE_LEASE_TIMEOUT sets,
// DefaultLeaseTimeout when it is unset or empty. A value that is not a
// duration from 1 s to 1 h is an error that names it.
func LeaseTimeout() (time.Duration, error) {
	v := strings.TrimSpace(os.Getenv(EnvLeaseTimeout))
	if v == "" {
		return DefaultLeaseTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || f != f { // not a number, or NaN
			return 0, fmt.Errorf("%s=%q is neither a duration (10s) nor a number of seconds", EnvLeaseTimeout, v)
		}
		if f > maxLeaseTimeout.Seconds() {
			f = maxLeaseTimeout.Seconds() + 1 // refused below, without an overflow
		}
		d = time.Duration(f * float64(time.Second))
	}
	if err := checkLeaseTimeout(d); err != nil {
		return 0, fmt.Errorf("%s=%q: %w", EnvLeaseTimeout, v, err)
	}
	return d, nil
}

func checkLeaseTimeout(d time.Duration) error {
	if d < minLeaseTimeout || d > maxLeaseTimeout {
		return fmt.Errorf("a lease timeout of %s is outside %s to %s", d, minLeaseTimeout, maxLeaseTimeout)
	}
	return nil
}

// heartbeatEvery is how often a holder writes to a lease of that timeout:
// about a fifth of it, a second at most, so that a few late heartbeats
// never end a lease.
func heartbeatEvery(timeout time.Duration) time.Duration {
	return min(max(timeout/5, 50*time.Millisecond), time.Second)
}
