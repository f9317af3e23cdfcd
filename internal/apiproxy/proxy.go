package apiproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// MaxCreateBody bounds the body of a container or network create: it is
	// read whole to be rewritten, and a larger one is refused (413) rather
	// than held without limit. Every other body streams.
	MaxCreateBody = 10 << 20

	// maxHeadBytes bounds a request's or a response's head (its first line
	// and header fields), as net/http's DefaultMaxHeaderBytes does.
	maxHeadBytes = 1 << 20
	// maxHeldAnswer bounds what is held of a create's 201 answer while the
	// hook hears of it; an answer larger than that (none is) streams on.
	maxHeldAnswer = 1 << 20
	// bufSize is the size of each of a connection's four buffers.
	bufSize = 16 << 10
	// defaultUpstreamPort is the engine's port when a tcp:// upstream names
	// none, as the Docker client assumes.
	defaultUpstreamPort = "2375"
)

// dialTimeout bounds a connection to the engine; a variable for the tests.
var dialTimeout = 10 * time.Second

// Hook is told of every container and network create that goes through the
// proxy, and of every removal the engine confirmed. Its methods are called
// from many goroutines at once.
type Hook interface {
	// Admit is called for each create, before it is forwarded. kind is
	// KindContainer or KindNetwork; name is the name the client asked for
	// ("" when it let the engine choose); labels are the labels the client
	// gave (every spelling of "Labels" merged; values that are not strings
	// left out), the hook's to read, not to keep. It returns the labels to add
	// (they replace the client's labels of the same keys) and, when not
	// "", the name to create the object under instead. An error refuses the
	// create: the client gets a 500 with the error's text, and the engine is
	// not called. ctx ends when the proxy closes.
	Admit(ctx context.Context, kind, name string, labels map[string]string) (add map[string]string, useName string, err error)
	// Created is called, after an Admit, once the engine answered the
	// create's success (201; 200 for Podman's own network create), and
	// before the client sees that answer (an answer larger than 1 MiB,
	// which a create's never is, streams to the client first). name is the
	// name the object was created under (Admit's useName, else the
	// client's, else ""), id the engine's id of it ("" in the unlikely
	// case the answer held none).
	Created(kind, name, id string)
	// Failed is called, after an Admit, when the engine did not answer
	// success: status is the status it answered, or 0 when it could not
	// be reached or the connection broke before its answer came. In the
	// last case the object may exist all the same: what Admit recorded
	// must not be forgotten because of a Failed alone.
	Failed(kind, name string, status int)
	// Removed is called when the engine answered, whatever it answered
	// (a 404 may mean something else removed it first), a request that
	// removes containers or networks of that kind, or may have (a
	// removal, a prune, a wait for a container's end), before the client
	// sees that answer. ref is the client's name or id of the one removed
	// (decoded from the path, as the engine took it; it may be an id
	// prefix), or "" when any of that kind may have gone. The hook checks
	// with the engine what is gone.
	Removed(kind, ref string)
}

// The kinds of object a Hook hears of.
const (
	KindContainer = "container"
	KindNetwork   = "network"
	// KindVolume is a named volume's create (POST /volumes/create, its
	// name in the body), KindImage an image build (POST /build), whose
	// name is the hook's own (Admit's useName: a build names no object,
	// and its labels go in the query) and whose Created never comes: the
	// build's answer streams to the client as it comes.
	KindVolume = "volume"
	KindImage  = "image"
)

// Proxy is a running proxy of the Docker Engine API. Its methods are safe
// for use by many goroutines.
type Proxy struct {
	path     string
	upstream endpoint
	hook     Hook
	ln       net.Listener

	ctx    context.Context // ends at Close: Admit's and the dials'
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{} // live connections, the clients' and the engine's

	accepted atomic.Int64 // clients' connections accepted so far

	wg sync.WaitGroup // every goroutine the proxy started
}

// endpoint is where the engine listens.
type endpoint struct {
	network string // "unix" or "tcp"
	address string
	host    string // as given, for messages
}

// Start listens on the unix socket socketPath and forwards every request
// it gets to the engine at upstream, in DOCKER_HOST syntax
// ("unix:///var/run/docker.sock", "tcp://host:port"), calling hook for
// each container and network create. The socket's folder must exist (its
// mode is the caller's business); nothing may be at socketPath. The socket
// file is made mode 0600, and removed by Close.
//
// Nothing is asked of the engine before a client connects: an engine that
// does not answer is told to each client, with a 502.
func Start(socketPath, upstream string, hook Hook) (*Proxy, error) {
	if hook == nil {
		return nil, errors.New("apiproxy: no hook")
	}
	up, err := parseUpstream(upstream)
	if err != nil {
		return nil, err
	}
	path, err := filepath.Abs(socketPath)
	if err != nil {
		return nil, fmt.Errorf("apiproxy: socket %s: %w", socketPath, err)
	}
	if up.network == "unix" && filepath.Clean(up.address) == path {
		return nil, fmt.Errorf("apiproxy: the upstream %s is the proxy's own socket", upstream)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("apiproxy: listen: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("apiproxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		path:     path,
		upstream: up,
		hook:     hook,
		ln:       ln,
		ctx:      ctx,
		cancel:   cancel,
		conns:    map[net.Conn]struct{}{},
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// parseUpstream reads an engine address in DOCKER_HOST syntax.
func parseUpstream(s string) (endpoint, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return endpoint{}, fmt.Errorf("apiproxy: upstream %q: want unix:///path or tcp://host:port", s)
	}
	switch strings.ToLower(scheme) {
	case "unix":
		if rest == "" {
			return endpoint{}, fmt.Errorf("apiproxy: upstream %q: no socket path", s)
		}
		return endpoint{network: "unix", address: rest, host: s}, nil
	case "tcp", "http":
		u, err := url.Parse("tcp://" + rest)
		if err != nil {
			return endpoint{}, fmt.Errorf("apiproxy: upstream %q: %w", s, err)
		}
		if u.Host == "" {
			return endpoint{}, fmt.Errorf("apiproxy: upstream %q: no host", s)
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
			return endpoint{}, fmt.Errorf("apiproxy: upstream %q: only tcp://host:port is supported (no path, query or user)", s)
		}
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), defaultUpstreamPort)
		}
		return endpoint{network: "tcp", address: addr, host: s}, nil
	default:
		return endpoint{}, fmt.Errorf("apiproxy: upstream %q: scheme %s is not supported (unix and tcp are; TLS, ssh and npipe are not)", s, scheme)
	}
}

// Addr is the proxy's address for DOCKER_HOST: "unix://" and the socket's
// absolute path.
func (p *Proxy) Addr() string { return "unix://" + p.path }

// Accepted is how many connections clients have made to the proxy so far.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Close stops accepting connections, closes the live ones (a request under
// way fails; its hook is told Failed) and waits until every goroutine of the
// proxy has ended: no hook method is called once Close returned. It
// removes the socket file. Later calls do nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()

	p.cancel()
	err := p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
	return err
}

// track adds c to the live connections, or closes it and reports false when
// the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// liveConns is how many connections are open, the clients' and the
// engine's.
func (p *Proxy) liveConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	var backoff time.Duration
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, say: wait and try again, as
			// net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		p.accepted.Add(1)
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			newConn(p, c).serve()
		}()
	}
}

// dial connects to the engine.
func (p *Proxy) dial() (net.Conn, error) {
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, p.upstream.network, p.upstream.address)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s: %w", dialTimeout, err)
		}
		return nil, fmt.Errorf("apiproxy: cannot reach the Docker engine at %s: %w", p.upstream.host, err)
	}
	if !p.track(c) {
		return nil, errors.New("apiproxy: the proxy is closed")
	}
	return c, nil
}

// newBuffers gives the reader and writer of one side of a connection.
func newBuffers(c net.Conn) (*bufio.Reader, *bufio.Writer) {
	return bufio.NewReaderSize(c, bufSize), bufio.NewWriterSize(c, bufSize)
}
