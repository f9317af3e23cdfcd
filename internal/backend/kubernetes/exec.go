package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/capbuf"
)

// inDirWithEnv runs as `sh -c inDirWithEnv rz-exec-in DIR N K=V... CMD...`:
// it starts CMD in DIR ("" keeps the pod's) with N variables added. A pod's
// exec has neither a working directory nor an environment of its own.
const inDirWithEnv = `[ -z "$1" ] || cd -- "$1" || exit 126
n=$2
shift 2
while [ "$n" -gt 0 ]; do export "$1"; shift; n=$((n - 1)); done
exec "$@"
`

// Exec runs cmd in the pod's container through the API server's exec, and
// waits for it to end, its life tied to this process's as on Docker: the
// lease wrapper (backend.ExecArgv) holds the exec's stdin, which this
// process keeps open and never writes to. When the connection goes (this
// process died, however it died, or ctx ended and Exec closed the stdin),
// the node closes that stdin and the wrapper ends the command's whole
// process group: SIGTERM, backend.ExecGrace, SIGKILL.
//
// ExecOptions.User is refused (an exec runs as the container's user);
// WorkingDir and Env are set by a few lines of sh before the command.
func (s *Sandbox) Exec(ctx context.Context, cmd []string, opt backend.ExecOptions) (backend.ExecResult, error) {
	what := fmt.Sprintf("exec %q in pod %s/%s", cmd, s.d.ns, s.name)
	switch {
	case len(cmd) == 0:
		return backend.ExecResult{}, fmt.Errorf("exec in pod %s/%s: empty command", s.d.ns, s.name)
	case opt.User != "":
		return backend.ExecResult{}, fmt.Errorf("%s as user %q: a pod's exec runs as its container's user: %w", what, opt.User, errors.ErrUnsupported)
	case ctx.Err() != nil:
		return backend.ExecResult{}, fmt.Errorf("%s: not started: %w", what, context.Cause(ctx))
	}
	for _, kv := range opt.Env {
		if k, _, _ := strings.Cut(kv, "="); !envName(k) {
			return backend.ExecResult{}, fmt.Errorf("%s: variable %q: a name of letters, digits and '_', not starting with a digit", what, k)
		}
	}
	inner := cmd
	if opt.WorkingDir != "" || len(opt.Env) > 0 {
		inner = append([]string{"/bin/sh", "-c", inDirWithEnv, "rz-exec-in", opt.WorkingDir, strconv.Itoa(len(opt.Env))}, opt.Env...)
		inner = append(inner, cmd...)
	}
	if err := s.d.need(ctx, what, execAccess...); err != nil {
		return backend.ExecResult{}, err
	}
	leased := opt.Stdin == nil
	ex, err := s.executor(backend.ExecArgv(leased, inner), true)
	if err != nil {
		return backend.ExecResult{}, fmt.Errorf("%s: %w", what, err)
	}

	limit := opt.OutputLimit
	if limit <= 0 {
		limit = backend.DefaultExecOutputLimit
	}
	stdout, stderr := capbuf.New(limit), capbuf.New(limit)
	marker := &backend.PGIDWriter{Next: stderr}
	// client-go's copies may still write once a cut stream has returned:
	// past the gate's close, they write nowhere.
	// The command has started once the wrapper says anything: its group,
	// first of all.
	started := make(chan struct{})
	outGate, errGate := &gate{w: stdout}, &gate{w: &firstWrite{w: marker, seen: started}}
	// The lease: a stdin that ends only when this process closes it, or
	// loses the connection.
	lease, hold := io.Pipe()
	stdin := io.Reader(lease)
	if !leased {
		stdin = opt.Stdin
	}
	// The stream outlives ctx: an interrupted command is ended through
	// its lease, and its output read to the end.
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	done := make(chan error, 1)
	if opt.Started != nil {
		opt.Started(s.name + ".x" + strconv.FormatInt(execSeq.Add(1), 10))
	}
	go func() {
		done <- ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: outGate, Stderr: errGate})
	}()

	var res backend.ExecResult
	var streamErr error
	wait := func() {
		select {
		case streamErr = <-done:
		case <-ctx.Done():
			select {
			case streamErr = <-done:
			default:
				res.Interrupted = context.Cause(ctx)
				streamErr = s.interrupt(hold, leased, marker, done, stop)
			}
		}
	}
	// Until the command starts, the wait is bounded whatever ctx says: a
	// stream the API server never answers (frozen, or a connection that
	// went silent) would hold Exec for ever.
	bound := time.NewTimer(s.d.execStart)
	defer bound.Stop()
	notStarted := false
	select {
	case streamErr = <-done:
	case <-started:
		wait()
	case <-ctx.Done():
		wait()
	case <-bound.C:
		select {
		case <-started:
			wait()
		default:
			stop()
			streamErr = <-done
			notStarted = true
		}
	}
	hold.Close()
	outGate.close()
	errGate.close()
	marker.Flush()
	res.PGID = marker.PGID()
	res.Stdout, res.StdoutTruncated = stdout.Bytes(), stdout.Truncated()
	res.Stderr, res.StderrTruncated = stderr.Bytes(), stderr.Truncated()
	if notStarted {
		return res, fmt.Errorf("%s: not started within %s: the API server or the pod's node did not answer (%v): %w", what, s.d.execStart, streamErr, backend.ErrUnreachable)
	}
	var exit utilexec.CodeExitError
	switch {
	case streamErr == nil:
		res.ExitCode = 0
	case errors.As(streamErr, &exit):
		res.ExitCode = exit.Code
	case errors.Is(streamErr, errClosedByUs) && res.PGID == 0:
		return res, fmt.Errorf("%s: it did not start, and its stream was cut after %s", what, backend.ExecGrace+3*time.Second)
	case errors.Is(streamErr, errClosedByUs):
		res.ExitCode = -1
	default:
		return res, fmt.Errorf("%s: %w", what, s.execError(streamErr))
	}
	if res.PGID == 0 && backend.SetsidMissing(res.ExitCode, res.Stderr) {
		return res, fmt.Errorf("%s: %w", what, backend.ErrNoSetsid)
	}
	return res, nil
}

// errClosedByUs marks a stream Exec cut because the command did not end in
// time after its lease did.
var errClosedByUs = errors.New("the exec's stream was closed after the command was ended")

// interrupt ends a running command because its context ended: under the
// lease by closing its stdin, else by a second exec that ends its group.
// It waits at most ExecGrace and 3 s more for the stream to end, then cuts
// it, which also ends the lease.
func (s *Sandbox) interrupt(hold *io.PipeWriter, leased bool, marker *backend.PGIDWriter, done <-chan error, cut func()) error {
	bound := time.NewTimer(backend.ExecGrace + 3*time.Second)
	defer bound.Stop()
	if leased {
		hold.Close()
	} else if pg := marker.WaitPGID(done); pg > 1 {
		s.endGroup(pg)
	}
	select {
	case err := <-done:
		return err
	case <-bound.C:
	}
	if pg := marker.PGID(); pg > 1 {
		s.endGroup(pg)
	}
	cut()
	<-done
	return errClosedByUs
}

// execSeq numbers the execs of this process, for their ids.
var execSeq atomic.Int64

// firstWrite closes seen at its first write, and passes every write to w.
type firstWrite struct {
	w    io.Writer
	once sync.Once
	seen chan struct{}
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.once.Do(func() { close(f.seen) })
	return f.w.Write(p)
}

// gate passes writes to w until it is closed, then drops them.
type gate struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return len(p), nil
	}
	return g.w.Write(p)
}

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// envName reports whether k can name a shell variable.
func envName(k string) bool {
	for i, c := range k {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return k != ""
}

// endGroup runs the wrapper's TERM, grace, KILL sequence on process group
// pgid from a second exec.
func (s *Sandbox) endGroup(pgid int) {
	ex, err := s.executor(backend.ExecEndArgv(pgid), false)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), backend.ExecGrace+5*time.Second)
	defer cancel()
	_ = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
}

// execError says what a failed exec means: a missing /bin/sh is
// ErrNoShell, a pod that is gone ErrNotFound, a stream whose connection
// went silent (its heartbeat's deadline passed) ErrUnreachable.
func (s *Sandbox) execError(err error) error {
	msg := err.Error()
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout(), strings.Contains(msg, "i/o timeout"):
		return fmt.Errorf("%w: the connection to the API server went silent: %s", backend.ErrUnreachable, msg)
	case strings.Contains(msg, "/bin/sh") && (strings.Contains(msg, "no such file or directory") || strings.Contains(msg, "not found")):
		return fmt.Errorf("%w (the node said: %s)", backend.ErrNoShell, msg)
	case strings.Contains(msg, "not found") && strings.Contains(msg, "pods"):
		return fmt.Errorf("%w: %s", backend.ErrNotFound, msg)
	}
	return err
}

// executor is a stream of argv in the pod's container, over WebSockets
// where the API server speaks them, else SPDY, as kubectl does.
func (s *Sandbox) executor(argv []string, stdin bool) (remotecommand.Executor, error) {
	req := s.d.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.d.ns).Name(s.name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: containerName, Command: argv, Stdin: stdin, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(s.d.stream, http.MethodGet, req.URL().String())
	if err != nil {
		return nil, err
	}
	sp, err := remotecommand.NewSPDYExecutor(s.d.stream, http.MethodPost, req.URL())
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}
