//go:build linux

package main

// The defects this harness found that are not fixed yet, by class: each
// violation of one is printed as such and counted apart (-strict counts
// it as any other). A class goes when its defect is fixed; none is open
// today (docs/chaos.md lists the fixed ones).
var knownDefects = map[string]string{}
