package reaper

import (
	"os"
	"slices"
)

// ReleaseWatchdog closes w's end of its stdin, as this process's exit
// would: the watchdog reaps its run and exits. Tests and benchmarks spawn
// many watchdogs and must end each; real use never does (the lease lives
// as long as the process).
func ReleaseWatchdog(w *Watchdog) error {
	leasesMu.Lock()
	defer leasesMu.Unlock()
	leases = slices.DeleteFunc(leases, func(f *os.File) bool { return f == w.lease })
	return w.lease.Close()
}
