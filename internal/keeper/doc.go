// Package keeper owns the engine-side lease keeper: a small container,
// one per run, on the engine the run uses, with that engine's socket
// mounted into it, that removes what carries the run's label on that
// engine when its lease ends, then itself. It is what reaps a run whose
// whole machine died (a destroyed CI VM, a preempted runner, a machine
// frozen or cut off), where the ledger and the watchdog died with it.
//
//   - Ensure makes sure the engine has the keeper image, building it when
//     it is missing: the program in ./program (the standard library only),
//     embedded in this package, built with the go tool into one static
//     binary for the engine's architecture, imported FROM scratch, tagged
//     rightsize-keeper:<12 hex of what it is made of> and labelled
//     dev.rightsize.keeper-image=1. Nothing is pulled. The image stays on
//     the engine, to be reused.
//   - Start starts a run's keeper, rz-keeper-<run id>, labelled
//     dev.rightsize.keeper=<run id> (never with the run's own label), with
//     the SHA-256 of its lease's secret (NewSecret), and returns once the
//     keeper says it reached its own engine through the socket. A keeper
//     nobody holds ends after its wait for a first holder (FirstHoldWait,
//     30 s, or the lease timeout when longer).
//   - Hold takes its lease, with the secret, from any process that can
//     reach the engine: an exec of the keeper program's holder in the
//     keeper's container (docker exec -i), whose stdin is the holder's
//     connection's alone, over which it writes a heartbeat about every
//     second. The connection closing (the holder exited, however, or its
//     machine went) ends the exec's stdin, and the lease; no heartbeat
//     for the lease timeout (RIGHTSIZE_LEASE_TIMEOUT, 10 s by default)
//     means the holder froze or vanished. Either way the keeper removes
//     the run's containers (forced, with their anonymous volumes), then
//     its networks, then itself. Closing the lease at a run's normal end
//     does the same: what is left then is nothing, or what the run failed
//     to remove. Nothing else ends a lease: the keeper has no stdin for a
//     docker attach to end, and refuses a holder without the secret, or a
//     second one while one holds it.
//   - A signal to the keeper (docker stop, an engine shutting down) ends
//     it without removing anything, itself included: stopped, it stays,
//     the run's sign of life for a sweep (Orphans) until a lease timeout
//     after its stop, and its holder starts it again (Revive).
//
// What the keeper removes is what its engine lists under the run's label
// (dev.rightsize.runId or dev.rightsize.run_id, equal to its run id),
// checked again on each answer; never a keep-alive sandbox
// (dev.rightsize.reuse* labels, rz-reuse-* names), another keeper, or a
// network a container of others still uses.
//
// The package never removes anything itself but a keeper: one it started
// and was told to Remove, a run's stopped keeper its holder let go of
// (RemoveIfStopped), or one a sweep found stopped long ago (RemoveStopped).
// It never removes the keeper image.
package keeper
