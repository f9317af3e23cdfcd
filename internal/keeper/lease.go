package keeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	// hello is what a holder writes first, and the keeper answers with
	// "held"; heartbeat is what it writes then. Any byte would do for a
	// heartbeat, but not the engine's detach keys (Ctrl-P, Ctrl-Q).
	hello     = 'H'
	heartbeat = '.'
)

var (
	// ErrClosed is a lease's Err after its holder closed it.
	ErrClosed = errors.New("the lease was closed")
	// ErrKeeperGone is wrapped by a lease's Err when the keeper's end of
	// it closed: the keeper ended (a signal, a removal) or the engine
	// dropped the connection.
	ErrKeeperGone = errors.New("the keeper's end of the lease closed")
)

// Lease is a held lease: while it is held, this process writes a heartbeat
// to the keeper's stdin; when it is closed, or this process ends however
// it ends, the connection closes and the keeper removes what carries its
// run's label, then itself.
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
// cli talks to, and keeps it with a heartbeat until Close or the end of
// this process. Any process that can reach the engine may hold it. A
// keeper has one lease in its life: once a holder lets go, it ends (two
// holders at once share it, and the first to let go ends it).
// Hold returns once the keeper has said it holds the lease.
func Hold(ctx context.Context, cli *client.Client, ref string) (*Lease, error) {
	ictx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := cli.ContainerInspect(ictx, ref, client.ContainerInspectOptions{})
	if err != nil {
		if errors.Is(docker.Classify("inspect", err), backend.ErrNotFound) {
			return nil, fmt.Errorf("keeper %s: %w: no such container", ref, ErrNotKeeper)
		}
		return nil, fmt.Errorf("keeper %s: %w", ref, err)
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
	att, err := cli.ContainerAttach(actx, c.ID, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true})
	if err != nil {
		return nil, fmt.Errorf("keeper %s: attaching to its stdin: %w", l.Keeper, err)
	}
	l.conn = att.Conn
	held := make(chan struct{})
	watch := &lineWatch{want: []byte("held\n"), seen: held}
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
	if err := l.write(hello); err != nil {
		l.end(fmt.Errorf("keeper %s: saying hello: %w", l.Keeper, err))
		return nil, l.err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-held:
	case <-l.done:
		return nil, fmt.Errorf("%w, before it said it held the lease (an earlier holder had let go, or its wait for one had ended)", l.err)
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
			if err := l.write(heartbeat); err != nil {
				l.end(fmt.Errorf("keeper %s: a heartbeat: %w", l.Keeper, err))
				return
			}
		}
	}
}

// write writes one byte of the lease; a write that cannot finish within
// the lease timeout has lost the lease anyway.
func (l *Lease) write(b byte) error {
	if err := l.conn.SetWriteDeadline(time.Now().Add(l.Timeout)); err != nil {
		return err
	}
	_, err := l.conn.Write([]byte{b})
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

// lineWatch closes seen once the stream written to it has had the line
// want (the keeper's stdout: its earlier lines may be replayed).
type lineWatch struct {
	want []byte
	seen chan struct{}
	line []byte
	done bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	if w.done {
		return len(p), nil
	}
	for _, b := range p {
		w.line = append(w.line, b)
		if b == '\n' {
			if bytes.Equal(w.line, w.want) {
				w.done = true
				close(w.seen)
				return len(p), nil
			}
			w.line = w.line[:0]
		} else if len(w.line) > 4096 {
			w.line = w.line[:0]
		}
	}
	return len(p), nil
}

func trimSlash(name string) string {
	if len(name) > 0 && name[0] == '/' {
		return name[1:]
	}
	return name
}
