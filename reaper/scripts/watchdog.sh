#!/bin/sh
# rightsize-go watchdog (POSIX sh; runs unchanged under dash, bash --posix and
# busybox ash).
#
# The waiting half of a watchdog. A Go test process spawns it once, as
#
#   sh -c SCRIPT rightsize-watchdog RUN
#
# (the text itself, never a file someone could change after the spawn),
# with PROGRAM, the test binary's path, in RIGHTSIZE_WATCHDOG_PROGRAM: no
# word of the command line names the test binary, so that a harness that
# ends leftover test binaries by matching their command lines (pkill -f)
# never takes a watchdog for one. RUN is the run's id, shown in `ps`. Its
# stdin is the read end of a pipe whose write end only that process
# holds, with these descriptors open:
#
#   3  PROGRAM, for reading: the test binary itself, which `go test` may
#      delete as soon as the test process has died
#   4  a file without a name (unlinked already), for writing
#   5  the same file, for reading from its start
#
# and with the environment that makes PROGRAM the watchdog's Go side
# (RIGHTSIZE_NATIVE_WATCHDOG=1, the run's folder and id, the engine's
# settings).
#
# While the owner lives, the script waits: each line the owner tells it
# ("+s ID NAME": a sandbox it created, "-s ID NAME": one it removed, and
# the same for networks and commands) is copied as it is to descriptor 4.
# Nothing is forked, nothing is run, no line is looked into: the waiting
# costs a shell blocked in read(2), and no CPU.
#
# At EOF (the owner exited: a clean exit, a panic and a SIGKILL alike), the
# script becomes PROGRAM, with the copied lines on its stdin and the words
# `rightsize-watchdog reaping RUN` as its arguments, which PROGRAM puts
# first in its command line while it works. PROGRAM does
# all the work and takes every decision: it removes what it was told by
# id, finds and removes what still carries the run's label, writes the
# run's fate, and deletes the run's files when nothing is left
# (internal/reaper, runNative). Where /proc/self/fd exists (Linux), it is
# run through descriptor 3, so a deleted binary still runs; elsewhere by
# its path, and a binary deleted already leaves the run to the next sweep.

set -u
set -f

# A terminal hangup or ^C aimed at the owner must not kill the watchdog
# before it has done its job; a closed stderr must not kill it while it
# logs. Ignored here, they stay ignored in PROGRAM.
trap '' HUP INT QUIT PIPE

fail() {
	printf 'rightsize watchdog: %s\n' "$*" >&2
	exit 2
}

[ "$#" -eq 1 ] && [ -n "$1" ] || fail "usage: watchdog RUN, with PROGRAM in RIGHTSIZE_WATCHDOG_PROGRAM (have $# arguments)"
run=$1
program=${RIGHTSIZE_WATCHDOG_PROGRAM-}
case $program in
/*) ;;
*) fail "PROGRAM '$program' (RIGHTSIZE_WATCHDOG_PROGRAM) is not an absolute path" ;;
esac
# The descriptors are checked before waiting: a caller that passes
# nonsense learns it at once, not after it died.
{ true <&3 && true >&4 && true <&5; } 2>/dev/null || fail "descriptors 3, 4 and 5 must be open"

# The wait. A last line without its newline is kept too.
while IFS= read -r line; do
	printf '%s\n' "$line" >&4
done
[ -z "$line" ] || printf '%s\n' "$line" >&4
exec 4>&-

if [ -e /proc/self/fd/3 ]; then
	exec /proc/self/fd/3 rightsize-watchdog reaping "$run" <&5
fi
[ -f "$program" ] || fail "PROGRAM $program is gone: the run is left to the next sweep"
exec "$program" rightsize-watchdog reaping "$run" <&5 3<&-
