// Package scripts carries the waiting half of the script watchdog, byte for
// byte: watchdog.sh (POSIX sh: dash, bash, busybox ash) and watchdog.ps1
// (Windows PowerShell 5.1), in [FS]. They are here, apart from the Go
// code, so that they can be read, run and reviewed as the scripts they are.
//
// Both do one thing, documented at the top of each: block reading stdin,
// the read end of a pipe whose write end only the owner holds, keeping
// the lines the owner tells (`+s ID NAME`, `-s ID NAME`, `+n ...`), and at
// EOF hand those lines to the test binary itself, re-run as the watchdog's
// Go side, which takes every decision. Nothing read from the pipe is ever
// run or looked into by a script.
//
// This package only carries the scripts: writing them out, spawning the
// process and everything done at the owner's death belong to the library's
// reaper, which package sandboxtest runs. A program has no need to import
// it.
package scripts

import "embed"

// FS holds watchdog.sh and watchdog.ps1.
//
//go:embed watchdog.sh watchdog.ps1
var FS embed.FS
