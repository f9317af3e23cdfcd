// Package mainfixture is a fixture of e2e: a test binary whose TestMain
// is sandboxtest.Main, as a user writes it, in one of the modes
// RZ_MAIN_FIXTURE names (unset, its tests skip and Main is not used):
//
//   - daemon: a test starts a command whose child leaves its session
//     (setsid) and outlives it; the binary ends through Main.
//   - tell: a test that passes, and nothing else: Main tells the fates it
//     finds (run under gotestsum by e2e).
//   - early: GuardAll, with a testcontainers-go provider made by a
//     package-level variable, before Main, creating a container.
package mainfixture
