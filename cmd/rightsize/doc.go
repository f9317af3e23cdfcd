// Command rightsize lists and cleans up what test processes using
// rightsize-go (or any member of the rightsize family: Rust, Kotlin, Node)
// left behind, and shows, live on the local engine, that a killed test
// leaves nothing.
//
// Every sandbox a rightsize test starts is listed, before it is created, in
// a ledger under the cache dir (RIGHTSIZE_CACHE_DIR, else
// $HOME/.cache/rightsize, %LOCALAPPDATA%\rightsize on Windows). A watchdog
// removes a run's sandboxes when its process dies however it dies, and the
// next process's sweep removes them when even the watchdog could not. This
// command reads that ledger and runs that sweep by hand.
//
// Install it with
//
//	go install github.com/rightsize/rightsize-go/cmd/rightsize@latest
//
// # Commands
//
//	rightsize ls [--json] [-v] [--cache DIR]
//
// One row per run in the ledger: run id, writer ("go", or "unknown" for the
// other languages, whose records name none), backend, engine endpoint ("-"
// when none is recorded), owner pid, status (alive, dead or unknown) and
// why, age of the record, and how many sandboxes and networks it lists. A
// record that cannot be read is shown as "unreadable", with its error. -v
// lists the names after the table, and the lines that are not valid names;
// --json prints an array of objects instead, with the fields documented by
// `rightsize help ls` (id, writer, backend, endpoint, msbPath, pid,
// startedIso, status, reason, error, modified, ageSeconds, sandboxes,
// networks, rejected, problems).
//
//	rightsize sweep [--dry-run] [--backend docker|msb] [--cache DIR] [-v]
//
// Removes now what dead runs left, through the backend RIGHTSIZE_BACKEND
// (or --backend) chooses, and prints the sweep's report: per run, what was
// decided and why, and per sandbox or network, how its removal went.
// --dry-run decides and reports but touches nothing, neither the engine nor
// a file of the ledger. -v logs each decision to stderr.
//
//	rightsize demo
//
// The first thing to run (`make demo`): a child process (this binary,
// re-executed, a program on sandboxtest.Run) starts two guarded containers
// and a network on the local Docker engine, is SIGKILLed, and its watchdog
// removes everything; then the same with the watchdog off
// (RIGHTSIZE_REAPER=sweep), where the leftovers stay until the next
// process's sweep removes them. Every step is listed from the engine and
// timed. It builds its own image FROM scratch from a static busybox
// (RIGHTSIZE_BUSYBOX, /bin/busybox, or a copy out of busybox:1.37.0-musl
// where a registry answers), uses a cache
// dir of its own, sets TESTCONTAINERS_RYUK_DISABLED=true for its child
// unless it is set, and leaves nothing behind, even when interrupted.
//
//	rightsize version
//	rightsize help [COMMAND]
//
// Every command also takes -h and --help.
//
// # Output
//
// Tables are aligned; colour is used only when the output is a terminal,
// never when NO_COLOR is set to a non-empty value. Nothing read from a
// ledger file reaches the terminal raw: control characters and invalid
// UTF-8 are shown escaped, as strconv.Quote would. Errors are one line on
// stderr, starting with "rightsize:".
//
// # Exit codes
//
//	0    done; for sweep, nothing was kept back
//	1    failed; for sweep, something could not be removed (the report says
//	     why, and it stays in the ledger for a later sweep), or no engine
//	     answers
//	2    usage error: unknown command or flag, bad argument
//	130  interrupted (Ctrl-C, SIGTERM); the demo cleans up first
package main
