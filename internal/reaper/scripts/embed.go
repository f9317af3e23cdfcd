// Package scripts owns the waiting half of the script watchdog:
// watchdog.sh (POSIX sh: dash, bash, busybox ash) and watchdog.ps1
// (Windows PowerShell 5.1), embedded byte for byte.
//
// Both do one thing, documented at the top of each: block reading stdin,
// the read end of a pipe whose write end only the owner holds, keeping
// the lines the owner tells (`+s ID NAME`, `-s ID NAME`, `+n ...`), and at
// EOF hand those lines to the test binary itself, re-run as the watchdog's
// Go side, which takes every decision. Nothing read from the pipe is ever
// run or looked into by a script.
//
// This package only carries the scripts. Writing them out, spawning the
// process and everything done at the owner's death belong to the reaper.
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
