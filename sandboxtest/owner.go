package sandboxtest

import (
	"context"
	"testing"
	"time"
)

// owner is who a guard or a network belongs to: a test, or the
// package-level suite of Main. Its methods are unexported so that a Suite
// offers its users only what they call.
type owner interface {
	// testTB is the test, nil for a suite: callers mark themselves as
	// helpers with it, in their own frame, so that a failure points at the
	// user's line.
	testTB() testing.TB
	addCleanup(func())
	fatalf(format string, args ...any)
	errorf(format string, args ...any)
	logf(format string, args ...any)
	// context for starting things; deadline is zero when there is none.
	context() context.Context
	deadline() time.Time
}

type tbOwner struct{ tb testing.TB }

func (o tbOwner) testTB() testing.TB { return o.tb }

func (o tbOwner) addCleanup(f func()) { o.tb.Cleanup(f) }

func (o tbOwner) fatalf(format string, args ...any) {
	o.tb.Helper()
	o.tb.Fatalf(format, args...)
}

func (o tbOwner) errorf(format string, args ...any) {
	o.tb.Helper()
	o.tb.Errorf(format, args...)
}

func (o tbOwner) logf(format string, args ...any) {
	o.tb.Helper()
	o.tb.Logf(format, args...)
}

func (o tbOwner) context() context.Context { return o.tb.Context() }

func (o tbOwner) deadline() time.Time {
	if d, ok := o.tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if t, ok := d.Deadline(); ok {
			return t
		}
	}
	return time.Time{}
}

// stopGrace is how long a stop waits after SIGTERM: want (2 s by default),
// but never more than a tenth of the time left before the deadline, so a
// test near `go test -timeout` keeps time for its other cleanups.
func stopGrace(want time.Duration, deadline time.Time) time.Duration {
	if want <= 0 {
		want = defaultStopGrace
	}
	if deadline.IsZero() {
		return want
	}
	left := time.Until(deadline) / 10
	if left < 0 {
		left = 0
	}
	return min(want, left)
}

// stopTimeout bounds a whole stop (signal, grace, removal, ledger).
const stopTimeout = 60 * time.Second
