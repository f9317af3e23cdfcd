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

// twoWatchdogs: the fates are those of two watchdogs of one run (the
// script one and the processes' native one; or two native ones, when a
// process came before the run's first sandbox), each telling its share.
func twoWatchdogs(fates map[string]ledger.Fate) bool {
	pids := map[int]bool{}
	for _, f := range fates {
		if f.By != "native watchdog" && f.By != "watchdog" {
			return false
		}
		pids[f.ByPID] = true
	}
	return len(pids) == len(fates)
}
