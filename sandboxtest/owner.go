package sandboxtest

import (
	"context"
	"testing"
	"time"
)

// owner is what a guard needs from whoever it belongs to: a test, or the
// package-level suite of Main.
type owner interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	// context for starting things; deadline is zero when there is none.
	context() context.Context
	deadline() time.Time
}

type tbOwner struct{ testing.TB }

func (o tbOwner) context() context.Context { return o.TB.Context() }

func (o tbOwner) deadline() time.Time {
	if d, ok := o.TB.(interface{ Deadline() (time.Time, bool) }); ok {
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
