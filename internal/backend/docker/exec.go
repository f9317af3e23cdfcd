package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/capbuf"
)

// The lease wrapper's constants and errors are the backend's.
const (
	ExecGrace              = backend.ExecGrace
	DefaultExecOutputLimit = backend.DefaultExecOutputLimit
)

var (
	ErrNoShell  = backend.ErrNoShell
	ErrNoSetsid = backend.ErrNoSetsid
)

// ExecOptions and ExecResult are the backend's.
type (
	ExecOptions = backend.ExecOptions
	ExecResult  = backend.ExecResult
)

// Exec runs cmd in the container and waits for it to end, tying its life
// to this process's: it runs in a process group of its own under a small
// sh wrapper that holds the exec's stdin as a lease. This process keeps
// the write side of that stdin open and never writes to it. When the
// connection closes — this process died, however it died, or ctx ended
// and Exec closed it — the engine closes the stdin, the wrapper reads EOF
// and ends the command's whole group: SIGTERM, ExecGrace for traps to run,
// then SIGKILL. Without it, a command in a container that outlives its
// test (a keep-alive one) would run on with no one to stop it.
//
// When the command exits by itself, whatever it left running in its group
// is ended too (SIGTERM, half a second, SIGKILL), so nothing outlives the
// exec. A command that moves itself to another session (setsid, a
// daemonizing server) leaves the group and is not followed.
//
// When ctx ends, Exec ends the command the same way and waits for it, at
// most ExecGrace and 3 s more; the result then has Interrupted set. An
// error means the command could not be run, or its end could not be
// confirmed: errors.Is(err, ErrNoShell) and ErrNoSetsid name a missing
// program in the image.
//
// The container needs /bin/sh (POSIX; busybox is enough) and setsid. The
// command's words reach it unchanged, as "$@", never as shell text; for
// shell syntax, run "sh", "-c", script. Dash and busybox sh run an EXIT
// trap when they exit, not when a signal they do not trap kills them: a
// script that must clean up traps TERM as well (bash runs EXIT traps
// either way).
//
// The container is addressed by name, so a handle from Adopt or
// SandboxFor runs commands as well as one from Create.
func (s *Sandbox) Exec(ctx context.Context, cmd []string, opt ExecOptions) (ExecResult, error) {
	what := fmt.Sprintf("exec %q in container %s", cmd, s.name)
	if len(cmd) == 0 {
		return ExecResult{}, fmt.Errorf("exec in container %s: empty command", s.name)
	}
	if ctx.Err() != nil {
		return ExecResult{}, fmt.Errorf("%s: not started: %w", what, context.Cause(ctx))
	}
	leased := opt.Stdin == nil
	mode := "lease"
	if !leased {
		mode = "stdin"
	}
	argv := append([]string{"/bin/sh", "-c", wrapperScript, "rz-exec", mode, graceSteps()}, cmd...)
	created, err := s.d.cli.ExecCreate(ctx, s.ref(), client.ExecCreateOptions{
		Cmd:          argv,
		Env:          opt.Env,
		WorkingDir:   opt.WorkingDir,
		User:         opt.User,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return ExecResult{}, classify(what, err)
	}
	if opt.Started != nil {
		opt.Started(created.ID)
	}
	// Once the engine starts the wrapper, the attach connection is its
	// lease: closing it, or losing it, ends the command.
	att, err := s.d.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return ExecResult{}, fmt.Errorf("%s: not started: %w", what, context.Cause(ctx))
		}
		return ExecResult{}, classify(what, err)
	}
	defer att.Close()

	limit := opt.OutputLimit
	if limit <= 0 {
		limit = DefaultExecOutputLimit
	}
	stdout := capbuf.New(limit)
	stderr := capbuf.New(limit)
	marker := &pgidWriter{next: stderr}
	demuxed := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, marker, att.Reader)
		marker.flush()
		demuxed <- err
	}()
	if !leased {
		go func() {
			// Not waited for: a Stdin that never returns from Read keeps
			// this goroutine, not the caller, waiting.
			_, _ = io.Copy(att.Conn, opt.Stdin)
			_ = closeWrite(att)
		}()
	}

	var res ExecResult
	var demuxErr error
	select {
	case demuxErr = <-demuxed:
	case <-ctx.Done():
		select {
		case demuxErr = <-demuxed: // it had ended already
		default:
			res.Interrupted = context.Cause(ctx)
			demuxErr = s.interrupt(att, leased, &marker.pgid, opt.User, demuxed)
		}
	}
	res.PGID = int(marker.pgid.Load())
	res.Stdout, res.StdoutTruncated = stdout.Bytes(), stdout.Truncated()
	res.Stderr, res.StderrTruncated = stderr.Bytes(), stderr.Truncated()

	code, err := s.execExitCode(created.ID)
	if err != nil {
		return res, fmt.Errorf("%s: %w", what, err)
	}
	res.ExitCode = code
	if res.PGID == 0 {
		if err := startFailure(code, res.Stdout, res.Stderr); err != nil {
			return res, fmt.Errorf("%s: %w", what, err)
		}
	}
	if demuxErr != nil && !errors.Is(demuxErr, io.EOF) && !errors.Is(demuxErr, errClosedByUs) {
		return res, fmt.Errorf("%s: reading its output: %w", what, demuxErr)
	}
	return res, nil
}

// errClosedByUs marks an output stream that Exec itself cut short.
var errClosedByUs = errors.New("output stream closed after the command was ended")

// interrupt ends a running exec because its context ended, and waits for
// its output stream to close. Under the lease, closing the write side of
// the connection is enough: the wrapper does the rest. Without it, or
// when the wrapper does not answer in time, a second exec signals the
// command's group by its pgid.
func (s *Sandbox) interrupt(att client.ExecAttachResult, leased bool, pgid *atomic.Int64, user string, demuxed <-chan error) error {
	bound := time.NewTimer(ExecGrace + 3*time.Second)
	defer bound.Stop()
	if leased {
		if err := closeWrite(att); err != nil {
			// No half-close on this connection: losing it ends the lease
			// too, but takes the output with it.
			att.Close()
			<-demuxed
			return errClosedByUs
		}
	} else {
		_ = closeWrite(att)
		s.endGroup(waitPGID(pgid, demuxed), user)
	}
	select {
	case err := <-demuxed:
		return err
	case <-bound.C:
	}
	// The wrapper did not finish: signal the group directly, then stop
	// reading, which also ends the lease.
	s.endGroup(int(pgid.Load()), user)
	att.Close()
	<-demuxed
	return errClosedByUs
}

// waitPGID waits a little for the wrapper to report the command's group,
// which it does before the command starts.
func waitPGID(pgid *atomic.Int64, demuxed <-chan error) int {
	deadline := time.Now().Add(time.Second)
	for pgid.Load() == 0 && time.Now().Before(deadline) {
		if len(demuxed) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return int(pgid.Load())
}

// endGroup runs the wrapper's TERM, grace, KILL sequence on a process
// group from a second exec, as user (who may signal what user started).
func (s *Sandbox) endGroup(pgid int, user string) {
	if pgid <= 1 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ExecGrace+5*time.Second)
	defer cancel()
	created, err := s.d.cli.ExecCreate(ctx, s.ref(), client.ExecCreateOptions{
		Cmd:  []string{"/bin/sh", "-c", endScript, "rz-exec-end", strconv.Itoa(pgid), graceSteps()},
		User: user,
	})
	if err != nil {
		return
	}
	// Detached: nothing is attached to this exec, and Podman refuses a
	// start that is neither attached nor detached ("must provide at least
	// one stream to attach to").
	if _, err := s.d.cli.ExecStart(ctx, created.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return
	}
	for ctx.Err() == nil {
		r, err := s.d.cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil || !r.Running {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// execExitCode waits for the engine to record the end of an exec whose
// output stream has closed, and returns its exit code.
func (s *Sandbox) execExitCode(id string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		r, err := s.d.cli.ExecInspect(ctx, id, client.ExecInspectOptions{})
		if err != nil {
			return -1, classify("inspect exec "+id, err)
		}
		if !r.Running {
			return r.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("its output stream closed but the engine still reports it running (exec %s, pid %d)", id, r.PID)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startFailure tells why the wrapper never started the command, from what
// the engine and the wrapper said; nil when nothing says it failed to.
func startFailure(code int, stdout, stderr []byte) error {
	// The engine writes a failed start into the output stream and records
	// 126 (Docker) or 127 (Podman); its words are in the noShell answer.
	// Anything else it says there (Podman: 126 with "permission denied")
	// is reported as it is.
	if (code == 126 || code == 127) && (bytes.Contains(stdout, []byte("OCI runtime")) || bytes.Contains(stderr, []byte("OCI runtime"))) {
		msg := strings.TrimSpace(string(stdout) + " " + string(stderr))
		if noShell.saysText(msg) {
			return fmt.Errorf("%w (the engine said: %s)", ErrNoShell, msg)
		}
		return fmt.Errorf("the engine could not start it: %s", msg)
	}
	if code == setsidMissingCode && bytes.Contains(stderr, []byte(setsidMissingMsg)) {
		return ErrNoSetsid
	}
	return nil
}

func closeWrite(att client.ExecAttachResult) error {
	if cw, ok := att.Conn.(client.CloseWriter); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
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

// pgidWriter takes the wrapper's first stderr line, "rz-exec pgid N",
// out of the stream and remembers N; everything else passes through.
type pgidWriter struct {
	next    io.Writer
	pgid    atomic.Int64
	pending []byte
	done    bool
}

func (w *pgidWriter) Write(p []byte) (int, error) {
	if w.done {
		return w.next.Write(p)
	}
	w.pending = append(w.pending, p...)
	nl := bytes.IndexByte(w.pending, '\n')
	if nl < 0 {
		if couldBeMarker(w.pending) {
			return len(p), nil
		}
		w.flush()
		return len(p), nil
	}
	if n, ok := parseMarker(w.pending[:nl]); ok {
		w.pgid.Store(int64(n))
		w.pending = w.pending[nl+1:]
	}
	w.flush()
	return len(p), nil
}

// flush passes on whatever is held back and stops looking for the marker.
func (w *pgidWriter) flush() {
	w.done = true
	if len(w.pending) > 0 {
		_, _ = w.next.Write(w.pending)
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
