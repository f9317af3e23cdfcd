// Package scripts owns the watchdog scripts that reap a run after its owner
// dies: watchdog.sh (POSIX sh: dash, bash, busybox ash) and watchdog.ps1
// (Windows PowerShell 5.1), embedded byte for byte.
//
// Both speak one protocol, documented at the top of each script:
//
//	watchdog RUNS_DIR RUN_ID [KIND ROLE MODE GONE RETRY N WORD1 ... WORDN] ...
//
// The watchdog blocks reading stdin, the read end of a pipe whose write end
// only the owner holds. While it waits, the owner tells it each sandbox and
// network it created and each it removed (`+s ID NAME`, `-s ID`, `+n ...`,
// `-n ...`). At EOF it removes what it was told, by id, in one batch; after
// a short settle it asks the engine for whatever still carries the run's
// label (the finder steps) and removes that too. It never reads a name
// from a ledger file for a labelled kind, and deletes the run's files only
// when nothing is left.
//
// This package only carries the scripts. Writing them to the cache directory,
// choosing the steps for a backend and spawning the process belong to the
// reaper. Ids and names are filtered to [A-Za-z0-9][A-Za-z0-9_.-]{0,127}
// and passed as arguments, never through a shell.
package scripts

import _ "embed"

// WatchdogSh is the POSIX sh watchdog (Linux, macOS).
//
//go:embed watchdog.sh
var WatchdogSh []byte

// WatchdogPs1 is the Windows PowerShell watchdog.
//
//go:embed watchdog.ps1
var WatchdogPs1 []byte
