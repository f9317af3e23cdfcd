// What the msb CLI is taken to be, and where that comes from.
//
// microsandbox cannot run on the machine this package was written on (no
// KVM), so nothing below was observed first-hand. It was read from the
// rightsize family's own msb backends, which were verified against real msb
// releases (0.6.2 to 0.7.1), and cross-checked with microsandbox's source
// and documentation:
//
//   - rightsize-rust, github.com/ngriaznov/rightsize-rust:
//     crates/rightsize-msb/src/commands.rs (every argv), backend.rs (the
//     attached-mode supervision, the retry on msb's state-database error,
//     the watchdog's stop+rm), ls_json.rs (the `ls --format json` shape).
//   - rightsize-node, github.com/ngriaznov/rightsize-node:
//     src/backend-msb/commands.ts, backend.ts, fixtures/fake-msb.mjs,
//     src/core/free-ports.ts (host ports), src/core/reaper/watchdog.ts,
//     docs/guide/backends.md (MSB_PATH, attached mode).
//   - microsandbox, github.com/superradcompany/microsandbox:
//     crates/cli/bin/main.rs (subcommands and aliases: `ls` = `list`,
//     `rm` = `remove`; errors printed as `error: <message>`, exit 1),
//     crates/cli/lib/commands/{run,stop,remove,list,logs,common}.rs,
//     crates/cli/lib/ui.rs (statuses), crates/microsandbox/lib/error.rs
//     (`sandbox not found: {0}`, `database error: {0}`,
//     `sandbox still running: {0}`), and docs.microsandbox.dev/cli/sandbox-commands.
//
// The command line this package uses, all as separate arguments:
//
//	msb run --name NAME [-m <MB>M] [-p HOST:GUEST[/udp]]... [-e KEY=VALUE]...
//	        [--mount-file SRC:DEST:rw,nodev]... IMAGE [-- COMMAND...]
//	msb stop NAME
//	msb rm NAME
//	msb ls --format json
//	msb logs NAME
//
//   - `msb run` is run attached (no -d) and kept as a child process for the
//     sandbox's whole life: the family found that `msb run -d` on the msb
//     releases it pins boots the VM without starting the image's
//     ENTRYPOINT/CMD. The attached process is msb's own supervisor of the
//     microVM; it exits once `msb stop` lands. Readiness is the name showing
//     status "Running" in `msb ls --format json`, never the child's output.
//     A COMMAND replaces the image's CMD; no `--` at all keeps the image's own.
//   - `msb ls --format json` prints a (pretty-printed) JSON array of objects
//     with keys created_at, image, name, status; status is msb's enum name,
//     capitalised: Created, Starting, Running, Stopped, Paused, Draining,
//     Crashed. Only name and status are read here.
//   - A missing sandbox makes stop and rm print `error: sandbox not found:
//     NAME` on stderr and exit 1. rm of a running one prints `error: sandbox
//     still running: NAME`.
//   - Concurrent msb invocations race the schema migrations of msb's shared
//     SQLite state database; the loser prints `error: database error: ...`.
//     The family retries stop and rm once, 500 ms later, on that text.
//   - Ports: msb publishes HOST:GUEST, and the host port is chosen by the
//     caller, never by msb: like the family, this package binds
//     127.0.0.1:0 to learn a free port, closes it, passes it to -p, and
//     reaches the sandbox at 127.0.0.1:HOST.
//   - Memory: -m takes a size such as 512M.
//   - Networks: msb has no network objects the family creates or removes;
//     the Rust and Node backends emulate aliases with exec tunnels, and
//     their ensure/remove network calls do nothing.
//   - `msb logs NAME` prints the sandbox's captured workload output.
//   - MSB_PATH names the msb binary (the family's override; msb itself also
//     sets it for its own children). msb has no daemon, so no endpoint.
//
// Guessed, or not confirmed by any source:
//
//   - The default bind address of -p. The family says its published ports
//     are reached on loopback; one copy of msb's docs says the default is
//     127.0.0.1 and that BIND_ADDR:HOST:GUEST widens it. Not verified.
//   - What `msb stop` prints for a sandbox that exists but is already
//     stopped (the stand-in treats it as success). RemoveSandboxes does not
//     depend on it: stop is best effort, rm decides the outcome.
//   - Older msb releases' wording for a missing sandbox. The "sandbox not
//     found" fragment is from current source; the family never classifies
//     it (its removals are best effort).
//   - Whether `msb logs` of a removed sandbox says "sandbox not found?"
//     (current source: `no logs directory for sandbox "NAME" (sandbox not
//     found?)`).
//   - Labels: current msb accepts --label, the family never passes one, so
//     Spec.Labels are not sent; a sandbox's identity is its name. So a
//     removal (a sweep, a watchdog, a run's close) cannot check that a
//     listed name is the run's, as the docker backend does by label: msb
//     removes the names a run lists as they are (stop, then rm), except
//     keep-alive names (rz-reuse-...), which it never removes.
//   - The `:rw,nodev` option block of --mount-file is Rust's spelling,
//     verified by the family against msb 0.6.8; Node passes SRC:DEST only.

// Package msb is the microsandbox backend of rightsize-go: a backend.Driver
// that drives the `msb` command line, found through MSB_PATH or else on
// PATH, as the rest of the rightsize family does.
//
// It owns the msb argv and nothing else: how a sandbox is started (an
// attached `msb run` held as a child process), how readiness and adoption
// are read from `msb ls --format json`, how stop and rm are retried once on
// msb's transient state-database error, how their output is classified
// (gone, not found, failed), the host ports it picks for a sandbox, and the
// watchdog plan that repeats stop+rm from a detached script.
//
// It must never run a shell or build a command line as a string: every
// word reaches msb as one argument, and every sandbox name is checked
// against a strict grammar before any command runs. It must never decide
// whether a sandbox may be removed (the reaper does), never remove anything
// it was not asked to, and never report a sandbox gone that msb has not
// confirmed gone or said does not exist.
//
// It is tested only against testdata/msb-standin, a POSIX sh stand-in that
// reproduces the documented behaviour of the subcommands above. It has not
// been run against a real microsandbox; see the notes at the top of doc.go
// for what was taken from where, and what was guessed.
package msb
