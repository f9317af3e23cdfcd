package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/rightsize/rightsize-go/internal/termtext"
)

const usageText = `rightsize: see and clean up what test processes left behind.

Every sandbox a rightsize test starts is listed in a ledger under the cache
dir; a watchdog removes it when the test process dies, and the next
process's sweep does when even the watchdog could not.

Usage:
  rightsize ls [--json] [-v] [--cache DIR]     list the runs in the ledger, then
                                               the keep-alive sandboxes
  rightsize ls --keep-alive [--json]           list only the keep-alive sandboxes
  rightsize ls --fates [--json]                what became of the runs that died
  rightsize ls --leases [--json]               list the kubernetes backend's run
                                               Leases
  rightsize sweep [--dry-run] [--backend docker|msb|kubernetes]
                  [--cache DIR] [-v] [--timeout D]
                                               remove what dead runs left
  rightsize sweep --run ID [--dry-run] [...]   reap one run by hand
  rightsize reuse rm [--dry-run] NAME... | --all
                                               remove keep-alive sandboxes
  rightsize reuse prune --older-than D [--dry-run]
                                               remove old keep-alive sandboxes,
                                               and registry entries of gone ones
  rightsize demo                               watch a killed test's sandboxes vanish
  rightsize version                            print the version
  rightsize help [COMMAND]                     print this, or a command's help

Environment:
  RIGHTSIZE_CACHE_DIR  the cache dir (default $HOME/.cache/rightsize;
                       %LOCALAPPDATA%\rightsize on Windows)
  RIGHTSIZE_BACKEND    docker (the default), msb or kubernetes (the cluster
                       of KUBECONFIG, else ~/.kube/config, else the pod's
                       own; the namespace RIGHTSIZE_KUBE_NAMESPACE, else
                       the context's)
  NO_COLOR             any non-empty value: no colour, even on a terminal
  TESTCONTAINERS_RYUK_DISABLED
                       the demo sets it to true for its test processes when
                       unset: Ryuk's image cannot be pulled without a registry

Exit codes: 0 done; 1 failed, or something could not be removed;
2 usage error; 130 interrupted.
`

var commandHelps = map[string]string{
	"ls": `Usage: rightsize ls [--json] [-v] [--cache DIR]
       rightsize ls --keep-alive [--json] [--cache DIR]
       rightsize ls --fates [--json] [--cache DIR]
       rightsize ls --leases [--json]
       rightsize ls --keepers [--json]

Lists every run in the ledger's runs folder, one row each: the run id; its
writer ("go", or "unknown" for the Rust, Kotlin and Node members of the
family, which do not record one); its backend; the engine endpoint ("-" when
none is recorded); the owner's pid; whether the owner is alive, dead or
cannot be judged from here, and why; the age of its record; how many
sandboxes and networks it lists; and TESTS, the test that made them (the
first, and how many others: "-" when none is known; -v names the test
and the place of its call for each name). A record that cannot be read is shown as
"unreadable" with its error. Runs are read one at a time: a folder of
200,000 runs is listed in seconds.

Then, in a second table, the keep-alive sandboxes: every entry of the
registry (reuse/ under the cache dir) joined by name with what the engine
says, and every keep-alive sandbox of the engine with no entry here
(another user's cache dir, another member's), marked "no entry": its name;
its image; its age (from the entry's createdIso, else from when the engine
created it); LAST USE, how long ago it was last used as the next sweep
judges it (made, adopted or held by a test process, its registry entry
written or read by one of the family), "in use" while a test process
holds it; EXPIRES, when the first sweep past that time removes it
(RIGHTSIZE_REUSE_TTL, or the Spec.ReuseTTL of its last user): "-" with no
time-to-live, "in use", "kept" when some of its users cannot be seen from
here (NOTE says why), "next sweep" once past it; its ports, guest->host;
ENGINE: running, stopped, gone (the entry outlives its sandbox: rightsize
reuse prune deletes it), or "?" (the engine could not be asked, or the
entry is another backend's); and NOTE: "no entry", an unreadable entry's
error, the keep-alive that superseded it (made later by the same test, at
the same place, from the same image repository), why it is kept. LAST
USE and EXPIRES are "-" for a sandbox the engine did not list. A
RIGHTSIZE_REUSE_TTL that is not a duration is said above the table. The
engine, the one RIGHTSIZE_BACKEND chooses, is given 5 s to answer; without
one, ls says so and still exits 0. When ended runs have fates, ls says how
many. Last, when the engine has any, its engine-side keepers (the leases
of runs whose watchdog holds one there, from any machine): each one's run,
name, state, lease timeout and age. On the kubernetes backend
(RIGHTSIZE_BACKEND=kubernetes), the run Leases of its namespace instead,
from any machine, each judged as a sweep judges it: its name, its run, its
holder (host/pid), when it was last renewed (by the holder's clock) and
for how long, whether that time has passed, and its state: held (its run
is alive), lapsed (its run is dead: a sweep deletes the Lease, and the
cluster's garbage collector its pods and Services), unjudged (it says no
renewal or duration) or not a run's (its name and labels disagree: never
touched, however stale).

--fates lists what became of the runs whose owners died (newest first, the
last 200, none older than 7 days): who noticed the death (its watchdog, a
later test process's sweep, rightsize sweep) and when, and each sandbox,
network and command: removed, already gone, ended, kept (and why), or not
this run's, with the test that left it and where. A test process tells
each fate once on stderr, at its first sandbox; ls --fates shows them
all, told or not.

Flags:
  --json        print the runs as a JSON array instead, one object per run
                (below); the engine is not asked
  -v            also list each run's names, rejected lines and problems
  --keep-alive  list only the keep-alive sandboxes; with --json, as one
                JSON object (below)
  --fates       list the fates of ended runs instead; with --json, as an
                array of fates, each as its file holds it
                (docs/after-a-crash.md) with path, writtenIso, told and
                error added
  --leases      list only the run Leases of the kubernetes backend; with
                --json, as one JSON object (below). Another backend keeps
                none, and says so
  --keepers     list only the engine-side keepers on the engine; with
                --json, as one JSON object (below)
  --cache DIR   read DIR instead of the cache dir

JSON fields of a run (all always present):
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
  tests        which test made each listed name, where rightsize-go knows
               it: {kind, name, test, place}; test is the test's name
               (TestCheckout/eu), or words with a space in them saying
               why no one test is named ("Setup (TestMain)", "no test
               (TestMain)", "TestA or TestB (parallel: could not tell
               which)"); place is file:line of the call in its code

JSON of --keep-alive --json: an object (all fields always present):
  cacheDir       the cache dir read
  backend        the backend of the engine asked ("" when none answered)
  endpoint       that engine's endpoint
  engineError    why the engine could not be asked ("" when it was)
  registryError  why the registry could not be read ("" when it was)
  ttlError       why RIGHTSIZE_REUSE_TTL was not read ("" when it was)
  keepAlive      an array, sorted by name, of:
    name         the sandbox's name (rz-reuse-<12 hex>)
    hash         its registry entry's hash, the file stem ("" when none)
    image        the image, as the entry (else the engine) names it
    createdIso   the entry's createdIso, else when the engine created it
                 ("" when neither says)
    ageSeconds   seconds since createdIso (null when unknown)
    ports        tcp guest port -> host port, as the entry records them
    udpPorts     the same for udp
    backend      the entry's backend (the engine's, for "no entry")
    engine       "running", "stopped", "gone" or "?"
    entry        whether the registry holds an entry for it
    error        why the entry could not be read ("" otherwise)
    note         "no entry", an unreadable entry's error, another backend
    lastUsedIso  its latest use seen ("" when the engine did not list it)
    lastUsedBy   what showed that use
    inUse        whether a rightsize-go test process holds it now
    ttlSeconds   the idle time-to-live that applies (null when none)
    ttlFrom      whose it is: RIGHTSIZE_REUSE_TTL, its last user's
                 Spec.ReuseTTL, or the one of the keep-alive that
                 superseded it
    expiresIso   when a sweep removes it ("" when none will)
    supersededBy the keep-alive that replaced it ("" when none)
    unseen       why some of its users cannot be seen from here, which
                 keeps it however idle ("" when they all can)

JSON of --leases --json: an object (all fields always present):
  backend        the backend asked ("" when none answered)
  endpoint       its endpoint (the API server's URL and the namespace)
  namespace      the namespace listed
  engineError    why the Leases could not be listed ("" when they were)
  leases         an array, sorted by name, of:
    name             the Lease's name (rz-run-<run id>)
    run              the run it is ("" when not a run's)
    holder           who last took or renewed it (host/pid)
    renewedIso       its renewTime ("" when none), by the holder's clock
    durationSeconds  its leaseDurationSeconds (0 when none)
    expiresIso       renewedIso plus that ("" when either is missing)
    expired          whether expiresIso has passed, by this clock
    state            "held", "lapsed", "unjudged" or "not a run's"
    reason           why that state

JSON of --keepers --json: an object (all fields always present):
  backend        the backend asked ("" when none answered)
  endpoint       its engine's endpoint
  engineError    why the keepers could not be listed ("" when they were)
  keepers        an array, as the engine lists them, of:
    run           the run whose lease it keeps
    name          its container's name (rz-keeper-<run id>)
    id            its container's id
    state         the engine's word: running, exited, ...
    leaseSeconds  its lease timeout (0 when its label does not say)
    createdIso    when the engine created it
`,
	"sweep": `Usage: rightsize sweep [--dry-run] [--backend docker|msb|kubernetes]
                       [--cache DIR] [-v] [--timeout D] [--run ID]

Removes what dead runs left behind, now, as every test process does at its
first use of a backend: for each run whose owner is dead, its sandboxes,
then its networks, then its ledger files. Runs that are alive, that cannot
be judged, or that belong to another backend or engine are left alone, and
so is another member's run none of whose names this engine has (it records
no engine, and may have used another). A
name leaves the ledger only once the engine confirmed it gone. Only what
the engine shows carries the run's label is removed: a listed name that is
not the run's (no label of it, a keep-alive sandbox) is left running and
reported as "not this run's".

Keep-alive sandboxes are never reaped with a run. With an idle
time-to-live (RIGHTSIZE_REUSE_TTL, or the Spec.ReuseTTL a test process
recorded), it then removes the keep-alive sandboxes no process has used
for that long, and says why ("idle since …"), unless a test process takes
one during the sweep (kept). rightsize ls shows when each expires.

On the kubernetes backend it also deletes, in its namespace, the run
Leases nobody renewed for their duration, from any machine, in this
machine's ledger or not (ls --leases lists them); the cluster's garbage
collector then deletes the pods and Services they own. A Lease renewed
since it was listed, a live one, and any Lease that is not provably a
run's (its name is not rz-run- and the run id both its labels carry) are
left alone. The report names the runs whose Lease was deleted ("lapsed
run claims dropped").

With --run ID, one run only, by hand: first what it holds (its row and its
names, as ls -v shows them), then the sweep of it. It is reaped unless its
owner is proven alive, even when no record says who owns it (the lines a
live Node process leaves after pruning its record, a writer killed before
its record) or its owner cannot be judged from here: use it for a run you
know is dead.

Flags:
  --dry-run          say what the sweep would decide, touching nothing (names
                     are looked up: what is not the run's is said so)
  --backend NAME     docker, msb or kubernetes, as RIGHTSIZE_BACKEND would
                     choose it
  --cache DIR        sweep DIR instead of the cache dir
  -v                 log each decision and removal to stderr
  --run ID           sweep run ID alone, by hand (above)
  --timeout D        stop after D (a duration: 30s, 2m), finding the engine
                     included; what was not reached stays in the ledger.
                     Default: no bound but each engine call's own deadline

Exit codes: 0 nothing was kept back; 1 something could not be removed (the
report says why; it stays in the ledger for a later sweep), --timeout ran
out, no engine answers, or, with --run, the run does not exist or was left
alone (its owner is alive, it is another engine's…); 2 usage error.
`,
	"reuse": `Usage: rightsize reuse rm [--dry-run] [--cache DIR] NAME...
       rightsize reuse rm --all [--dry-run] [--cache DIR]
       rightsize reuse prune --older-than D [--dry-run] [--cache DIR]

Removes keep-alive sandboxes (Spec.Reuse with RIGHTSIZE_REUSE=true), which
no run, watchdog or sweep ever removes (but a sweep with an idle
time-to-live, RIGHTSIZE_REUSE_TTL or Spec.ReuseTTL: rightsize help sweep),
from the engine RIGHTSIZE_BACKEND chooses, and deletes their entries from
the registry (reuse/ under the cache dir). rightsize ls lists them, with
their last use and when they expire.

  rm NAME...   removes the keep-alive sandboxes named, whatever their age,
               even one a test is using. A name the engine has that is not
               a keep-alive sandbox (no dev.rightsize.reuse label) is
               refused and left alone. A name the engine no longer has
               only loses its registry entry.
  rm --all     removes every keep-alive sandbox on the engine (those of
               other cache dirs and other members too), and deletes the
               registry entries whose sandbox is gone.
  prune        removes the keep-alive sandboxes older than D: by the
               createdIso of their registry entry, else by when the engine
               created them. One a rightsize-go test process of yours on
               this host is using, whatever its cache dir (it holds the
               sandbox's use lock in $TMPDIR/rightsize-<uid>/), is kept;
               the lock is held around the check and the removal, so no
               test adopts it in between. Then deletes every registry
               entry whose sandbox the engine no longer has, whatever its
               age. 0s prunes every one not in use.

An entry a process is writing (it holds reuse/<hash>.lock), or wrote after
the engine was asked, is kept: it is a new sandbox's.

Flags:
  --dry-run         say what would be removed, touching nothing (prune only
                    tries the use locks, and lets go at once)
  --all             rm: every keep-alive sandbox
  --older-than D    prune: a duration (12h, 30m, 0s)
  --cache DIR       use the registry in DIR instead of the cache dir

Exit codes: 0 done (sandboxes kept on purpose included); 1 something was
refused or could not be removed (the lines marked ! say why), or no engine
answers; 2 usage error.
`,
	"demo": `Usage: rightsize demo

Shows rightsize at work on the local Docker engine, with timings:

  1. a test process (this binary, re-executed, creating through the
     reaper's session and the backend's driver, as a test does) starts
     two guarded containers and a network, listed by the backend;
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
		return &usageError{msg: fmt.Sprintf("no help for %s: no such command", termtext.Quote(args[0]))}
	}
	c.commandHelp(c.stdout, name)
	return nil
}
