//go:build linux

package main

import "github.com/rightsize/rightsize-go/internal/ledger"

// The defects this harness found that are not fixed yet, by class: each
// violation of one is printed as such and counted apart (-strict counts
// it as any other). A class goes when its defect is fixed.
const (
	classTwoWatchdogFates = "two-watchdog-fates"
)

var knownDefects = map[string]string{
	classTwoWatchdogFates: "a run with local processes has two watchdogs (a native one for its processes beside the script one for its sandboxes; or, when a process came before its first sandbox and the main watchdog is native, two native ones that both end its processes), and each writes a fate of its own for the one death; docs/chaos.md",
}

// twoWatchdogs: fate first is a watchdog's, and another watchdog of the
// run (the script one beside the processes' native one; or two native
// ones, when a process came before the run's first sandbox) wrote one
// too: each told its share of the one death.
func twoWatchdogs(fates map[string]ledger.Fate, first string) bool {
	f := fates[first]
	if f.By != "native watchdog" && f.By != "watchdog" {
		return false
	}
	for name, g := range fates {
		if name != first && (g.By == "native watchdog" || g.By == "watchdog") && g.ByPID != f.ByPID {
			return true
		}
	}
	return false
}
