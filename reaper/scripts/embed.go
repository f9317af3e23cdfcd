// Package scripts owns the watchdog scripts that reap a run after its owner
// dies: watchdog.sh (POSIX sh: dash, bash, busybox ash) and watchdog.ps1
// (Windows PowerShell 5.1), embedded byte for byte.
//
// Both speak one protocol, documented at the top of each script:
//
//	watchdog RUNS_DIR RUN_ID [LIST MODE GONE RETRY N WORD1 ... WORDN] ...
//
// The watchdog blocks reading stdin, the read end of a pipe whose write end
// only the owner holds; at EOF it runs the steps (engine removal commands with
// the run's names appended), drops from the ledger every name that was
// removed or reported missing, and deletes the run's files when nothing is
// left, keeping the record otherwise.
//
// This package only carries the scripts. Writing them to the cache directory,
// choosing the steps for a backend and spawning the process belong to the
// reaper; the scripts must never run anything taken from a ledger file: names
// are filtered to [A-Za-z0-9][A-Za-z0-9_.-]{0,127} and passed as arguments.
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
