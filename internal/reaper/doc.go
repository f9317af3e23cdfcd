// Package reaper owns the two backstops that remove what a test process
// leaves behind when no cleanup of its own ever runs (SIGKILL, OOM-kill,
// `go test -timeout`, a cancelled CI step):
//
//   - Sweep, run once per process at first backend use (and from TestMain
//     or the rightsize command): every other run in the ledger whose owner
//     is dead has its sandboxes and networks removed through this process's
//     backend, then its files deleted.
//   - The watchdog, a small detached script spawned once per process before
//     its first sandbox: it waits for its stdin to reach end-of-file, which
//     happens when the owner is gone however it died, then removes what the
//     run still lists.
//
// RIGHTSIZE_REAPER chooses which of them run (ModeFromEnv).
//
// The reaper must never remove anything of a process that is, or may be,
// alive; never remove a name from the ledger unless the backend confirmed it
// gone or never there; and never pass a line of a ledger file to a command
// unless it is a valid name, as one argument. It knows nothing of testing.
package reaper
