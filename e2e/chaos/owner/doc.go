// Package owner is the owner the chaos harness (e2e/chaos) kills: a test
// binary, built once with `go test -c`, whose one test does what its plan
// (package e2e/chaos/internal/plan) says through sandboxtest's public
// calls, as a user's test would, reports each step on a pipe, and then
// dies the way the plan says. Without a plan its test skips.
package owner
