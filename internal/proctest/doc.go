// Package proctest runs the helper processes of this module's tests: a test
// binary re-executed into one of its own tests (or any program) that
// reports to the test on stdout, one "rz:key=value" line each, and is
// killed, waited for and shown when something goes wrong.
//
// It is for the tests of github.com/rightsize/rightsize-go only (and for
// the e2e benchmark harness, which drives the same owner processes); no
// package the library ships may import it.
//
// The test's side: Start returns a Proc whose methods return errors;
// StartHelper binds one to a test, failing it when the process cannot be
// started or does not say what it must, and killing the process when the
// test ends. Get waits for a key, Wait for the end (the process exited and
// its stdout and stderr reached end-of-file), Status says how it ended.
// Lines without the "rz:" prefix (the testing package's own, or a protocol
// of another shape) are kept in order: Lines, Output.
//
// The helper's side: Say reports a key, WaitGo waits for the test's "go"
// line, Block waits until the test closes stdin or dies.
//
// Stdout and stderr are pipes the Proc reads itself, not through os/exec:
// its exit is seen when it exits, even while a process it started still
// holds them, and whether they were left to such a process is a question a
// test can ask (Wait fails).
package proctest
