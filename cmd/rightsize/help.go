package main

import (
	"fmt"
	"io"
	"strings"
)

const usageText = `rightsize: see and clean up what test processes left behind.

Every sandbox a rightsize test starts is listed in a ledger under the cache
dir; a watchdog removes it when the test process dies, and the next
process's sweep does when even the watchdog could not.

Usage:
  rightsize ls [--json] [-v] [--cache DIR]     list the runs in the ledger
  rightsize sweep [--dry-run] [--backend docker|msb] [--cache DIR] [-v]
                                               remove what dead runs left
  rightsize demo                               watch a killed test's sandboxes vanish
  rightsize version                            print the version
  rightsize help [COMMAND]                     print this, or a command's help

Environment:
  RIGHTSIZE_CACHE_DIR  the cache dir (default $HOME/.cache/rightsize;
                       %LOCALAPPDATA%\rightsize on Windows)
  RIGHTSIZE_BACKEND    docker (the default) or msb
  NO_COLOR             any non-empty value: no colour, even on a terminal
  TESTCONTAINERS_RYUK_DISABLED
                       the demo sets it to true for its test processes when
                       unset: Ryuk's image cannot be pulled without a registry

Exit codes: 0 done; 1 failed, or something could not be removed;
2 usage error; 130 interrupted.
`

var commandHelps = map[string]string{
	"ls": `Usage: rightsize ls [--json] [-v] [--cache DIR]

Lists every run in the ledger's runs folder, one row each: the run id; its
writer ("go", or "unknown" for the Rust, Kotlin and Node members of the
family, which do not record one); its backend; the engine endpoint ("-" when
none is recorded); the owner's pid; whether the owner is alive, dead or
cannot be judged from here, and why; the age of its record; and how many
sandboxes and networks it lists. A record that cannot be read is shown as
"unreadable" with its error.

Flags:
  --json       print a JSON array instead, one object per run (below)
  -v           also list each run's names, rejected lines and problems
  --cache DIR  read DIR instead of the cache dir

JSON fields (all always present):
  id           the run id (the file stem)
  writer       "go", "unknown", or what the record says
  backend      "docker", "msb" ("" when unreadable)
  endpoint     the engine the run used ("" when none recorded)
  msbPath      the msb binary, for msb runs ("" otherwise)
  pid          the owner's pid (0 when unreadable)
  startedIso   when the owner started, as recorded ("" when unknown)
  status       "alive", "dead", "unknown" or "unreadable"
  reason       why that status
  error        why the record is unreadable ("" otherwise)
  modified     the record's modification time, RFC 3339, UTC
  ageSeconds   seconds since then
  sandboxes    the sandbox names listed (an array, maybe empty)
  networks     the network names listed
  rejected     lines that are not valid names: {file, line, excerpt, length};
               excerpt is quoted, so it holds no raw control character
  problems     files of the run that could not be read
`,
	"sweep": `Usage: rightsize sweep [--dry-run] [--backend docker|msb] [--cache DIR] [-v]

Removes what dead runs left behind, now, as every test process does at its
first use of a backend: for each run whose owner is dead, its sandboxes,
then its networks, then its ledger files. Runs that are alive, that cannot
be judged, or that belong to another backend or engine are left alone. A
name leaves the ledger only once the engine confirmed it gone.

Flags:
  --dry-run          say what would be removed, touching nothing
  --backend NAME     docker or msb, as RIGHTSIZE_BACKEND would choose it
  --cache DIR        sweep DIR instead of the cache dir
  -v                 log each decision and removal to stderr

Exit codes: 0 nothing was kept back; 1 something could not be removed (the
report says why; it stays in the ledger for a later sweep), or no engine
answers; 2 usage error.
`,
	"demo": `Usage: rightsize demo

Shows rightsize at work on the local Docker engine, with timings:

  1. a test process (this binary, re-executed, a program on
     sandboxtest.Run) starts two guarded containers and a network,
     listed from the engine;
  2. it is SIGKILLed, so none of its own cleanup can run;
  3. its watchdog removes everything;
  4-6. the same with the watchdog off (RIGHTSIZE_REAPER=sweep): the
     leftovers stay, and the next process's sweep removes them.

It builds its own image FROM scratch out of a static busybox
(RIGHTSIZE_BUSYBOX, else /bin/busybox, else a copy out of the
busybox:1.37.0-musl image where a registry answers), keeps its
ledger in a temporary cache dir, and leaves no container, network or file
behind, even when interrupted with Ctrl-C (exit 130). The image stays on the
engine for the next run. The test processes get
TESTCONTAINERS_RYUK_DISABLED=true unless it is set: Ryuk's image cannot be
pulled without a registry, and rightsize does not need it.
`,
	"version": `Usage: rightsize version

Prints the module version (as ` + "`go install …@version`" + ` recorded it;
"(devel)" for a build from a checkout), the Go version and the platform.
`,
	"help": `Usage: rightsize help [COMMAND]

Prints the usage of rightsize, or of one command.
`,
}

func (c *cli) usage(w io.Writer) { io.WriteString(w, usageText) }

func (c *cli) commandHelp(w io.Writer, cmd string) {
	io.WriteString(w, commandHelps[cmd])
}

func (c *cli) help(args []string) error {
	switch {
	case len(args) == 0:
		c.usage(c.stdout)
		return nil
	case len(args) > 1:
		return &usageError{cmd: "help", msg: "help takes at most one command"}
	}
	name := strings.TrimLeft(args[0], "-")
	if name == "h" {
		name = "help"
	}
	if _, ok := commandHelps[name]; !ok {
		return &usageError{msg: fmt.Sprintf("no help for %s: no such command", quoteIfNeeded(args[0]))}
	}
	c.commandHelp(c.stdout, name)
	return nil
}
