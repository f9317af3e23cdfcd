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
//	rightsize ls --keep-alive [--json] [--cache DIR]
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
// networks, rejected, problems). Runs are read and printed one at a time,
// so a folder of 200,000 runs is listed in a few seconds.
//
// After the runs, a second table lists the keep-alive sandboxes: the
// registry's entries (reuse/<hash>.json) joined by name with what the
// engine says of them, and the engine's keep-alive sandboxes that have no
// entry here (another cache dir, another member), marked "no entry". Each
// has its name, image, age (from the entry's createdIso, else from the
// engine's creation time), ports (guest->host) and state on the engine:
// running, stopped, gone, or "?" when the engine could not be asked (ls
// gives it 5 s, and without one still exits 0). --keep-alive prints that
// table alone; with --json, one object whose "keepAlive" array holds a
// sandbox each. ls --json keeps its shape (an array of runs) and does not
// ask the engine.
//
//	rightsize ls --leases [--json]
//
// The run Leases of the kubernetes backend's namespace (RIGHTSIZE_BACKEND=
// kubernetes), of runs from any machine: each one's run, holder, renewal,
// duration, whether it has expired, and what a sweep makes of it (held,
// lapsed, unjudged, or not a run's and never touched). Plain ls ends with
// the same table on that backend.
//
//	rightsize sweep [--dry-run] [--backend docker|msb|kubernetes] [--cache DIR] [-v] [--timeout D]
//
// Removes now what dead runs left, through the backend RIGHTSIZE_BACKEND
// (or --backend) chooses, and prints the sweep's report: per run, what was
// decided and why, and per sandbox or network, how its removal went. On
// the kubernetes backend it also deletes the run Leases that lapsed,
// whichever machine made them; the cluster's garbage collector deletes
// what they own.
// --dry-run decides and reports but touches nothing, neither the engine nor
// a file of the ledger. -v logs each decision to stderr. --timeout bounds
// the whole sweep, finding the engine included: when it runs out, the
// report says so, what was not reached stays in the ledger, and the exit
// code is 1.
//
//	rightsize sweep --run ID [--dry-run] [--backend docker|msb|kubernetes] [--cache DIR] [-v] [--timeout D]
//
// Reaps the one run ID by hand, after printing what it holds (its ls row
// and names): unless its owner is proven alive, even when no record says
// who owns it, as with the lines a live Node process leaves after pruning
// its record. Only what the engine shows carries the run's label is
// removed; the rest of what it lists is reported as not the run's and left
// running. A run whose owner is alive is left alone, and the exit code is
// 1, as it is for a run that does not exist.
//
//	rightsize reuse rm [--dry-run] [--cache DIR] NAME...
//	rightsize reuse rm --all [--dry-run] [--cache DIR]
//	rightsize reuse prune --older-than D [--dry-run] [--cache DIR]
//
// Removes keep-alive sandboxes, which nothing else ever removes, and
// deletes their registry entries: the ones named (a name the engine shows
// is not a keep-alive sandbox is refused, exit 1), every one on the engine
// (--all), or those older than D, by their entry's createdIso or else the
// engine's creation time (prune: one a rightsize-go test process is using
// is kept). rm --all and prune also delete the registry entries whose
// sandbox the engine no longer has.
//
//	rightsize demo
//
// The first thing to run (`make demo`): a child process (this binary,
// re-executed, creating through the reaper's session and the backend's
// driver, as a test does) starts two guarded containers and a network on
// the local Docker engine, is SIGKILLed, and its watchdog removes
// everything; then the same with the watchdog off (RIGHTSIZE_REAPER=sweep),
// where the leftovers stay until the next process's sweep removes them.
// Every step is listed through the backend's listing of the run, and
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
//	     why, and it stays in the ledger for a later sweep), --timeout ran
//	     out, or no engine answers; for sweep --run, also a run that does
//	     not exist or was left alone; for reuse, something was refused or
//	     could not be removed
//	2    usage error: unknown command or flag, bad argument
//	130  interrupted (Ctrl-C, SIGTERM); the demo cleans up first
package main
