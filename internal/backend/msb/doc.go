// What the msb CLI is taken to be, and where that comes from.
//
// Verified against the real msb 0.6.18 (scripts/msb.sh installs it from
// the npm registry; the tests named TestReal… run it, in the msb gate of
// `make test`), up to a microVM's boot, which none gets on the machine the
// tests run on (docs/backends.md says why):
//
//	msb run --name NAME [-m <MB>M] [-p HOST:GUEST[/udp]]... [-e KEY=VALUE]...
//	        [--label=KEY=VALUE]... [--mount-file SRC:DEST:rw,nodev]...
//	        IMAGE [-- COMMAND...]
//	msb stop -f NAME | msb stop -t SECONDS NAME
//	msb rm NAME
//	msb inspect NAME --format json
//	msb ls --format json
//	msb logs NAME
//
//   - Every word is one argument. msb reads each flag above as the backend
//     means it (`msb inspect` shows the labels, the environment, the
//     memory, the ports published on 127.0.0.1 and a read-write nodev bind
//     of the file); a label is split at its first '=', an empty key
//     refused; `--label=K=V` keeps a key or value starting with '-' from
//     being read as a flag. A COMMAND replaces the image's CMD (msb does
//     not store it); no `--` at all keeps the image's own.
//   - `msb run` is run attached (no -d) and kept as a child process for the
//     sandbox's whole life: the family found that `msb run -d` on earlier
//     releases booted the VM without starting the image's ENTRYPOINT/CMD.
//     The attached process is msb's supervisor of the microVM (it starts
//     `msb sandbox`, which outlives it when it is killed); it exits once
//     `msb stop` lands. While the VM boots msb lists the sandbox
//     "Starting"; one that fails to boot ends "Stopped", and `msb run`
//     exits 1 saying `error: failed to start "NAME"`. Readiness is the name
//     showing status "Running" in `msb ls --format json`, never the
//     child's output.
//   - `msb ls --format json` prints a pretty-printed JSON array of objects
//     with keys created_at, image, name, status ("[]" when none); status
//     is msb's enum name: Created, Starting, Running, Stopped, Paused,
//     Draining, Crashed. `msb inspect NAME --format json` prints one object
//     with name, status and config.labels (the sandbox's labels and its
//     image's).
//   - A missing sandbox makes inspect, stop, rm and logs print `error:
//     sandbox not found: NAME` on stderr and exit 1. rm of one that runs,
//     or boots, prints `error: sandbox still running: cannot remove sandbox
//     'NAME': still running`. stop of a stopped one succeeds. A graceful
//     stop of one that boots waits for the boot (4.6 s seen); -f is
//     immediate; -t SECONDS is the grace before msb kills it.
//   - msb keeps its state in an SQLite database under MSB_HOME
//     (~/.microsandbox when unset), guards its migrations with a lock file
//     and retries a locked database itself; only once that is spent (about
//     40 s; config.json's database.busy_timeout_secs) does it print
//     `error: runtime error: database error: ... database is locked`. The
//     family retries stop and rm once, 500 ms later, on the `error:
//     database error:` of earlier releases, which that text holds too;
//     this package retries every invocation so.
//   - Ports: msb publishes HOST:GUEST on 127.0.0.1 (BIND_ADDR:HOST:GUEST
//     widens it), and the host port is chosen by the caller, never by msb:
//     like the family, this package binds 127.0.0.1:0 to learn a free
//     port, closes it, passes it to -p, and reaches the sandbox at
//     127.0.0.1:HOST.
//   - Memory: -m takes a size such as 512M (512 MB when unset; 32M is too
//     little to boot).
//   - Networks: msb has no network objects the family creates or removes;
//     the Rust and Node backends emulate aliases with exec tunnels, and
//     their ensure/remove network calls do nothing.
//   - MSB_PATH names the msb binary (the family's override, and what the
//     umbrella npm package's node shim reads). msb finds libkrunfw beside
//     itself. msb has no daemon: its home is this backend's endpoint.
//
// Taken from the rightsize family's msb backends and microsandbox's
// sources, not seen here (it needs a booted microVM):
//
//   - what a running sandbox does: its workload's output in `msb logs`,
//     its published ports answering, `msb stop` ending the attached
//     `msb run` (testdata/msb-standin reproduces these for the tests that
//     need them); the sources read were rightsize-rust
//     (crates/rightsize-msb), rightsize-node (src/backend-msb) and
//     microsandbox (crates/cli, crates/microsandbox).
//   - whether `msb run -d` still skips the image's command.

// Package msb is the microsandbox backend of rightsize-go: a backend.Driver
// that drives the `msb` command line, found through MSB_PATH or else on
// PATH, as the rest of the rightsize family does.
//
// It owns the msb argv and nothing else: how a sandbox is started (an
// attached `msb run` held as a child process) and labelled (its run's
// labels, as on Docker), how readiness and adoption are read from `msb ls
// --format json` and ownership from `msb inspect`, how every invocation is
// retried once on msb's transient state-database error, how output is
// classified (gone, not found, failed), the host ports it picks for a
// sandbox, and the watchdog plan (the same msb, the same home).
//
// It must never run a shell or build a command line as a string: every
// word reaches msb as one argument, and every sandbox name is checked
// against a strict grammar before any command runs. It removes only what
// the rule every backend shares (backend.NotOwnedWhy) shows to be the
// run's, or, carrying no run label at all (the other members' sandboxes),
// what the run's list names; it never removes anything it was not asked
// to, and never reports a sandbox gone that msb has not confirmed gone or
// said does not exist.
//
// It is tested against the real msb up to a microVM's boot (the TestReal…
// tests, in the msb gate of `make test`), and against testdata/msb-standin,
// a POSIX sh stand-in, for what needs a booted one. See the notes at the
// top of doc.go for what was seen and what was taken from elsewhere.
package msb
