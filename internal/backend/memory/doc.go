// Package memory is a sandbox backend with no engine: a "sandbox" or a
// network is a small JSON file in a folder of this host, written and
// removed under the ledger's file locks, with its run's mark, its labels
// and its keep-alive marks. Nothing runs inside a memory sandbox: it has
// no process, no logs, no published ports and no Exec. What it does have
// is everything the reaper acts on — create, list by run, remove by name
// or id, ownership, networks in use, keep-alive reuse — seen alike by
// every process of the host that names the same folder, so that a
// detached watchdog and the next run's sweep remove a dead run's memory
// sandboxes exactly as they remove containers.
//
// RIGHTSIZE_BACKEND=memory chooses it (import this package, as
// sandboxtest and cmd/rightsize do). Its folder is RIGHTSIZE_MEMORY_DIR,
// else memory/ in the cache dir; runs recorded against one folder are
// never reaped through another. It is for tests of code that drives
// sandboxes and for the examples: it runs on any machine, with no engine.
//
// It must never be taken for an engine: a test that needs a real server
// in its sandbox needs the docker or msb backend.
package memory
