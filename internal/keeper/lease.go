package keeper

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
)

const (
	// holdTimeout bounds Hold's wait for the keeper to say it holds the
	// lease.
	holdTimeout = 30 * time.Second
	// heartbeat is what a holder writes to keep the lease; any byte would
	// do, but not the engine's detach keys (Ctrl-P, Ctrl-Q).
	heartbeat = '.'
	// holdCommand is what Hold runs in the keeper's container: the keeper
	// program's holder, which carries its stdin to the keeper
	// (program/lease.go).
	holdCommand = programPath
)

var (
	// ErrClosed is a lease's Err after its holder closed it.
	ErrClosed = errors.New("the lease was closed")
	// ErrKeeperGone is wrapped by a lease's Err when the keeper's end of
	// it closed: the keeper ended (a signal, a removal) or the engine
	// dropped the connection.
	ErrKeeperGone = errors.New("the keeper's end of the lease closed")
	// ErrRefusedHolder is wrapped by Hold's error when the keeper refused
	// the holder: not the lease's secret, or another holder holds it.
	ErrRefusedHolder = errors.New("the keeper refused the holder")
)

// secretBytes is the size of a lease's secret.
const secretBytes = 32

// NewSecret returns a new lease secret: 32 random bytes in hex.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// validSecret reports whether s is one of NewSecret's: it is passed on a
// line of its own, and the keeper bounds that line.
func validSecret(s string) bool {
	if len(s) != 2*secretBytes {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// secretHash is what the keeper is started with: the hex SHA-256 of the
// secret, which a holder shows.
func secretHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Lease is a held lease: while it is held, this process writes a heartbeat
// to the keeper; when it is closed, or this process ends however it ends,
// the connection closes and the keeper removes what carries its run's
// label, then itself.
type Lease struct {
	Keeper string // the keeper's name
	// Timeout is the keeper's lease timeout; heartbeats come far more
	// often.
	Timeout time.Duration

	conn net.Conn
	done chan struct{}
	once sync.Once
	err  error // set before done closes
}

// Hold takes the lease of the keeper ref (its name or id) on the engine
// cli talks to, with its secret, and keeps it with a heartbeat until Close
// or the end of this process. Any process that can reach the engine and
// knows the secret may hold it, one at a time: the keeper refuses another
// holder while one holds it (ErrRefusedHolder).
//
// The lease is an exec of the keeper's holder in its container (docker
// exec -i), whose stdin is this connection's alone: the engine closes it
// when the connection closes, and the keeper then ends the lease. Nothing
// but its holder can end it: not a docker attach to the keeper (it has no
// stdin), not another exec (it lacks the secret, or comes second).
// Hold returns once the keeper has said it holds the lease.
func Hold(ctx context.Context, cli *client.Client, ref, secret string) (*Lease, error) {
	if !validSecret(secret) {
		return nil, fmt.Errorf("keeper %s: the lease's secret is not one of NewSecret's", ref)
	}
	res, err := inspectStarted(ctx, cli, ref)
	if err != nil {
		return nil, err
	}
	c := res.Container
	if c.Config == nil || c.Config.Labels[LabelKeeper] == "" {
		return nil, fmt.Errorf("keeper %s: %w: it has no %s label", ref, ErrNotKeeper, LabelKeeper)
	}
	if c.State == nil || !c.State.Running {
		return nil, fmt.Errorf("keeper %s: %w: it is not running", ref, ErrNotKeeper)
	}
	timeout, err := time.ParseDuration(c.Config.Labels[LabelLease])
	if err != nil || checkLeaseTimeout(timeout) != nil {
		return nil, fmt.Errorf("keeper %s: %w: its %s label %q is not a lease timeout", ref, ErrNotKeeper, LabelLease, c.Config.Labels[LabelLease])
	}
	l := &Lease{Keeper: trimSlash(c.Name), Timeout: timeout, done: make(chan struct{})}

	actx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	ex, err := cli.ExecCreate(actx, c.ID, client.ExecCreateOptions{
		Cmd:          []string{holdCommand, "hold"},
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("keeper %s: running its holder: %w", l.Keeper, err)
	}
	att, err := cli.ExecAttach(actx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("keeper %s: running its holder: %w", l.Keeper, err)
	}
	l.conn = att.Conn
	answer := make(chan string, 1)
	watch := &lineWatch{answer: answer}
	go func() {
		_, err := stdcopy.StdCopy(watch, io.Discard, att.Reader)
		if err == nil {
			err = io.EOF
		}
		l.end(fmt.Errorf("keeper %s: %w (%v)", l.Keeper, ErrKeeperGone, err))
	}()

	wait := holdTimeout
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if err := l.writeString(secret + "\n"); err != nil {
		l.end(fmt.Errorf("keeper %s: saying hello: %w", l.Keeper, err))
		return nil, l.err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case a := <-answer:
		if a != heldWord {
			err := fmt.Errorf("keeper %s: %w: %s", l.Keeper, ErrRefusedHolder, a)
			if strings.HasPrefix(a, "error:") {
				err = fmt.Errorf("keeper %s: %s", l.Keeper, a)
			}
			l.end(err)
			return nil, err
		}
	case <-l.done:
		return nil, fmt.Errorf("%w, before it said it held the lease (its wait for a holder had ended, or its engine did not run the holder)", l.err)
	case <-timer.C:
		l.end(fmt.Errorf("keeper %s: it did not say it held the lease within %s", l.Keeper, wait))
		return nil, l.err
	case <-ctx.Done():
		l.end(fmt.Errorf("keeper %s: %w", l.Keeper, ctx.Err()))
		return nil, l.err
	}
	go l.keep()
	return l, nil
}

// keep writes the heartbeats until the lease ends.
func (l *Lease) keep() {
	t := time.NewTicker(heartbeatEvery(l.Timeout))
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			if err := l.writeString(string(heartbeat)); err != nil {
				l.end(fmt.Errorf("keeper %s: a heartbeat: %w", l.Keeper, err))
				return
			}
		}
	}
}

// inspectStarted inspects the keeper ref, waiting while it is created and
// not started yet (its holder may be started as soon as it is created).
func inspectStarted(ctx context.Context, cli *client.Client, ref string) (client.ContainerInspectResult, error) {
	deadline := time.Now().Add(holdTimeout)
	wait := 2 * time.Millisecond
	for {
		ictx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := cli.ContainerInspect(ictx, ref, client.ContainerInspectOptions{})
		cancel()
		if err != nil {
			if errors.Is(docker.Classify("inspect", err), backend.ErrNotFound) {
				return res, fmt.Errorf("keeper %s: %w: no such container", ref, ErrNotKeeper)
			}
			return res, fmt.Errorf("keeper %s: %w", ref, err)
		}
		st := res.Container.State
		if st == nil || st.Status != "created" || time.Now().After(deadline) {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("keeper %s: %w", ref, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// writeString writes to the lease; a write that cannot finish within the
// lease timeout has lost the lease anyway.
func (l *Lease) writeString(s string) error {
	if err := l.conn.SetWriteDeadline(time.Now().Add(l.Timeout)); err != nil {
		return err
	}
	_, err := io.WriteString(l.conn, s)
	return err
}

// end ends the lease with err, once: the connection closes, and so the
// keeper's stdin.
func (l *Lease) end(err error) {
	l.once.Do(func() {
		l.err = err
		_ = l.conn.Close()
		close(l.done)
	})
}

// Close ends the lease: the keeper removes what still carries its run's
// label (after a run's own end, nothing), then itself. It returns nil
// when the lease was still held, else why it had ended.
func (l *Lease) Close() error {
	l.end(ErrClosed)
	if errors.Is(l.err, ErrClosed) {
		return nil
	}
	return l.err
}

// Done is closed when the lease has ended: Close, or a failure (Err).
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err says why the lease ended: nil while it is held, ErrClosed after
// Close, or what failed.
func (l *Lease) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

// heldWord is the keeper's answer to a holder it took.
const heldWord = "held"

// lineWatch sends the first line of the stream written to it (the
// holder's stdout: the keeper's answer), trimmed, on answer.
type lineWatch struct {
	answer chan<- string
	line   []byte
	done   bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	if w.done {
		return len(p), nil
	}
	for _, b := range p {
		if b == '\n' || len(w.line) > 4096 {
			w.done = true
			w.answer <- strings.TrimSpace(string(w.line))
			return len(p), nil
		}
		w.line = append(w.line, b)
	}
	return len(p), nil
}

func trimSlash(name string) string {
	if len(name) > 0 && name[0] == '/' {
		return name[1:]
	}
	return name
}
