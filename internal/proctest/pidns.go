package proctest

import "github.com/rightsize/rightsize-go/internal/pidns"

// NeedHostPidNamespace skips a test that judges a record naming no pid
// namespace (the Rust, Kotlin and Node members write none), or signals a
// process the engine reports, when the test runs in a pid namespace of its
// own (inside a container): from there such a record is "unknown" by
// design, and the engine's pids are not this process's.
func NeedHostPidNamespace(tb interface {
	Helper()
	Skipf(format string, args ...any)
}) {
	tb.Helper()
	if !pidns.InInitial() {
		tb.Skipf("runs only in the host's pid namespace: this process is in %s, from where a record without a pid namespace is judged unknown by design", pidns.Self())
	}
}
