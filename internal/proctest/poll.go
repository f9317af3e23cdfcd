package proctest

import "time"

// pollEvery is how often Poll and WaitUntil ask again.
const pollEvery = 5 * time.Millisecond

// Poll calls cond until it holds or within has passed, and reports whether
// it held. It is how a test waits for a condition, never a bare sleep.
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
}

// WaitUntil polls cond until it holds and returns how long that took; it
// fails tb ("waited … for what") when within passes first. within is cut
// short to leave 10 s before the test's own deadline, for its cleanups.
func WaitUntil(tb TB, within time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			within = min(within, time.Until(dl)-10*time.Second)
		}
	}
	start := time.Now()
	if !Poll(within, cond) {
		tb.Fatalf("waited %s for %s", within, what)
	}
	return time.Since(start)
}
