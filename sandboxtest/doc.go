// Package sandboxtest is what a Go test calls to get a sandbox (a Docker
// container, a microsandbox VM, a network, a local process) that is gone
// when the test ends, however it ends:
//
//   - [Start](t, spec) starts one and registers its stop with t.Cleanup
//     before anything is created; [NewNetwork](t) does the same for a
//     network, [StartProcess](t, cmd) for a local program and all it
//     starts.
//   - [Track](t) is a testcontainers-go customizer, so any testcontainers-go
//     module (postgres.Run(ctx, img, sandboxtest.Track(t))) gets the same
//     guarantees; [GuardAll] in [Main] gets them for whatever the tests
//     create without sandboxtest.
//   - [Main](m) in TestMain sweeps what dead runs left, runs the tests and
//     removes what this run still has; with [Setup](fn) it starts sandboxes
//     shared by every test of the package ([Suite.Start]), which a test
//     binds to itself with [Guard.For].
//   - [Guard.Exec] runs a command in a sandbox, ended when the test binary
//     dies.
//   - [NewVolume](t) and [NewImage](t, build) make a named volume and an
//     image built for the test, gone as its sandboxes go.
//   - A [Spec] with Reuse (and RIGHTSIZE_REUSE=1) is a keep-alive: made
//     once, adopted by later test processes, never removed with a run; with
//     ReuseTTL (or RIGHTSIZE_REUSE_TTL) a sweep removes one no test has
//     used for that long.
//   - [LeakCheck] in Main fails the package when its tests leave a
//     sandbox, network or process of the run behind.
//
// Every sandbox, network and process says which test made it and where:
// the labels dev.rightsize.test (TestCheckout/eu) and
// dev.rightsize.test.place (store_test.go:42) on the engine, and its
// run's origins in the ledger, which a crash's fate, `rightsize ls`,
// LeakCheck and a failed start tell.
//
// Behind every sandbox: a line in the run ledger (package ledger) written
// before it is created and removed only once it is gone; a watchdog that
// removes it within about a second if the test binary is killed (SIGKILL,
// OOM-kill, `go test -timeout`); and a sweep, at the next process's first
// use, for when even the watchdog was killed. Any program that imports this
// package can serve as its own watchdog: its init sees to it, before
// anything reads flags. RIGHTSIZE_REAPER, RIGHTSIZE_REUSE,
// RIGHTSIZE_BACKEND and RIGHTSIZE_CACHE_DIR tune it (docs/environment.md);
// RIGHTSIZE_BACKEND=memory runs it all with no engine: a sandbox is then a
// file of this host that runs nothing (docs/backends.md).
//
// The package knows what a test needs and nothing of an engine's details:
// those live in the backends under internal/.
package sandboxtest
