package backend

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The lease wrapper: the few lines of sh every engine's Exec runs in the
// sandbox around the command (ExecArgv), so that the command's whole
// process group ends when the exec's stdin does, and what it reports
// before the command starts (its group, or a missing setsid).

// ExecArgv is the argv of the wrapper around cmd: under the stdin lease
// when leased, else with the stdin passed to the command.
func ExecArgv(leased bool, cmd []string) []string {
	mode := "lease"
	if !leased {
		mode = "stdin"
	}
	return append([]string{"/bin/sh", "-c", wrapperScript, "rz-exec", mode, graceSteps()}, cmd...)
}

// ExecEndArgv is the argv, for a second exec, that ends process group
// pgid as the wrapper would: SIGTERM, ExecGrace, SIGKILL.
func ExecEndArgv(pgid int) []string {
	return []string{"/bin/sh", "-c", endScript, "rz-exec-end", strconv.Itoa(pgid), graceSteps()}
}

// SetsidMissing reports whether an exec that ended with code and wrote
// stderr is the wrapper saying the sandbox has no setsid.
func SetsidMissing(code int, stderr []byte) bool {
	return code == setsidMissingCode && bytes.Contains(stderr, []byte(setsidMissingMsg))
}

// graceSteps is ExecGrace in the wrapper's steps of 50 ms.
func graceSteps() string { return strconv.Itoa(int(ExecGrace / (50 * time.Millisecond))) }

// What the wrapper says before the command starts; 121 is spelled out in
// wrapperScript too.
const (
	setsidMissingCode = 121
	setsidMissingMsg  = "rz-exec: setsid: not found"
	pgidPrefix        = "rz-exec pgid "
)

// endFuncs are the shell functions the wrapper and the second exec share.
//
// alive: the group still has a process that is not a zombie. `kill -0`
// alone counts zombies, and an orphan reparented to a PID 1 that never
// reaps (busybox sleep, say) stays one for ever: waiting for it would
// cost the whole grace every time. /proc/PID/stat gives the state (field
// 3) and the group (field 5) after the parenthesized name.
//
// end PGID STEPS: SIGTERM to the group (SIGCONT too, so that a stopped
// process can act on it), then up to STEPS steps of 50 ms while any of it
// lives, then SIGKILL. Most processes die at once on SIGTERM: short steps
// end the wait soon after. A sleep without fractions counts whole seconds;
// no sleep at all makes the grace end at once.
const endFuncs = `alive() {
	kill -0 -"$1" 2>/dev/null || return 1
	[ -r /proc/self/stat ] || return 0
	for f in /proc/[0-9]*/stat; do
		{ read -r l <"$f"; } 2>/dev/null || continue
		set -f
		# shellcheck disable=SC2086
		set -- "$1" ${l##*') '}
		set +f
		[ "$4" = "$1" ] && [ "$2" != Z ] && return 0
		set -- "$1"
	done
	return 1
}
end() {
	kill -TERM -"$1" 2>/dev/null || return 0
	kill -CONT -"$1" 2>/dev/null
	i=0
	while [ "$i" -lt "$2" ] && alive "$1"; do
		if sleep 0.05 2>/dev/null; then
			i=$((i + 1))
		else
			sleep 1 2>/dev/null
			i=$((i + 20))
		fi
	done
	kill -KILL -"$1" 2>/dev/null
	return 0
}
`

// wrapperScript runs as `sh -c wrapperScript rz-exec MODE STEPS CMD...`.
// The command's words arrive as "$@" and are never part of the text.
//
// From a non-interactive shell a background child is not a group leader,
// so setsid does not fork: $! is the new session's and group's id. The
// command's leader first writes that id on stderr (the only line the
// wrapper adds; Exec takes it out), then becomes the command. In lease
// mode the command's stdin is /dev/null and a background subshell reads
// the wrapper's stdin with the read builtin (no cat child to outlive it);
// at EOF it ignores TERM from then on and ends the group. When the command
// exits first, the wrapper kills that reader (still reading, it dies on
// TERM; already ending the group, it finishes), ends what the command left
// in its group, and exits with the command's code.
const wrapperScript = `mode=$1 steps=$2
shift 2
command -v setsid >/dev/null 2>&1 || {
	echo '` + setsidMissingMsg + `; Exec needs it to give the command a process group of its own' >&2
	exit 121
}
` + endFuncs + `run='printf "` + pgidPrefix + `%s\n" "$$" >&2; exec "$@"'
exec 3<&0
if [ "$mode" = lease ]; then
	setsid /bin/sh -c "$run" rz-exec "$@" </dev/null 3<&- &
	pg=$!
	(
		while read -r _; do :; done
		trap '' TERM
		end "$pg" "$steps"
	) <&3 &
	w=$!
else
	setsid /bin/sh -c "$run" rz-exec "$@" <&3 3<&- &
	pg=$!
	w=
fi
exec 3<&-
wait "$pg" 2>/dev/null
code=$?
if [ -n "$w" ]; then
	kill "$w" 2>/dev/null
	wait "$w" 2>/dev/null
fi
end "$pg" 10
exit "$code"
`

// endScript runs as `sh -c endScript rz-exec-end PGID STEPS`.
const endScript = endFuncs + `end "$1" "$2"
`

// PGIDWriter takes the wrapper's first stderr line, "rz-exec pgid N",
// out of the stream and remembers N (PGID); everything else passes on to
// Next. Flush once the stream has ended.
type PGIDWriter struct {
	Next    io.Writer
	pgid    atomic.Int64
	pending []byte
	done    bool
}

func (w *PGIDWriter) Write(p []byte) (int, error) {
	if w.done {
		return w.Next.Write(p)
	}
	w.pending = append(w.pending, p...)
	nl := bytes.IndexByte(w.pending, '\n')
	if nl < 0 {
		if couldBeMarker(w.pending) {
			return len(p), nil
		}
		w.Flush()
		return len(p), nil
	}
	if n, ok := parseMarker(w.pending[:nl]); ok {
		w.pgid.Store(int64(n))
		w.pending = w.pending[nl+1:]
	}
	w.Flush()
	return len(p), nil
}

// Flush passes on whatever is held back and stops looking for the marker.
func (w *PGIDWriter) Flush() {
	w.done = true
	if len(w.pending) > 0 {
		_, _ = w.Next.Write(w.pending)
	}
	w.pending = nil
}

func couldBeMarker(b []byte) bool {
	if len(b) <= len(pgidPrefix) {
		return strings.HasPrefix(pgidPrefix, string(b))
	}
	return len(b) < len(pgidPrefix)+20 && bytes.HasPrefix(b, []byte(pgidPrefix))
}

func parseMarker(line []byte) (int, bool) {
	digits, ok := bytes.CutPrefix(line, []byte(pgidPrefix))
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(digits))
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// PGID is the command's process group the wrapper reported; 0 until it
// has, and when it never did.
func (w *PGIDWriter) PGID() int { return int(w.pgid.Load()) }

// WaitPGID waits up to a second for the wrapper to report the command's
// group, which it does before the command starts, and returns it (0 when
// it did not). It stops early once done holds the exec's end: an exec
// that ended without the marker will never report one.
func (w *PGIDWriter) WaitPGID(done <-chan error) int {
	for deadline := time.Now().Add(time.Second); w.PGID() == 0 && time.Now().Before(deadline) && len(done) == 0; {
		time.Sleep(10 * time.Millisecond)
	}
	return w.PGID()
}
