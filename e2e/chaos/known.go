//go:build linux

package main

// The defects this harness found that are not fixed yet, by class: each
// violation of one is printed as such and counted apart (-strict counts
// it as any other). A class goes when its defect is fixed.
const (
	classGuardAllEscape = "guardall-first-look"
)

var knownDefects = map[string]string{
	classGuardAllEscape: "under sandboxtest.GuardAll, when testcontainers-go's one look at the guard's socket fails (an engine fault), it takes the default socket for the life of the binary: every container the binary makes with testcontainers-go then reaches the engine past the guard, unlabelled and unlisted, and a killed binary leaves it running; Main goes on with the tests; docs/chaos.md",
}
