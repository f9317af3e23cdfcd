package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
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
	argv := backend.ExecArgv(leased, cmd)
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
	marker := &backend.PGIDWriter{Next: stderr}
	demuxed := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, marker, att.Reader)
		marker.Flush()
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
			demuxErr = s.interrupt(att, leased, marker, opt.User, demuxed)
		}
	}
	res.PGID = marker.PGID()
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
func (s *Sandbox) interrupt(att client.ExecAttachResult, leased bool, pgid *backend.PGIDWriter, user string, demuxed <-chan error) error {
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
		s.endGroup(pgid.WaitPGID(demuxed), user)
	}
	select {
	case err := <-demuxed:
		return err
	case <-bound.C:
	}
	// The wrapper did not finish: signal the group directly, then stop
	// reading, which also ends the lease.
	s.endGroup(pgid.PGID(), user)
	att.Close()
	<-demuxed
	return errClosedByUs
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
		Cmd:  backend.ExecEndArgv(pgid),
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
	if backend.SetsidMissing(code, stderr) {
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
