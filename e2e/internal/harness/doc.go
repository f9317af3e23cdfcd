// Package harness is what the crash matrix (package e2e) and its benchmark
// harness (e2e/bench) share: the owner process they kill, the way they
// start and read it, and the ways they look at the engine and the ledger
// without going through the code under test.
//
//   - Plan and Owner: what a re-executed owner process does (start sandboxes
//     and networks through sandboxtest, say what it started, then die or
//     block the way the plan says). A plan travels in RZ_E2E_PLAN as JSON.
//     It reports with internal/proctest, which also starts and reads it.
//   - Engine: containers and networks by run label, straight from the
//     engine API.
//   - Proxy: a socket forwarder whose engine can be made to vanish.
//
// Nothing here removes anything but what a caller names; nothing here
// decides what the product should do.
package harness
