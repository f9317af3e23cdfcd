//go:build linux

package harness

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Proxy forwards every connection made to its listening address to a
// target socket, byte for byte. Stopping it closes the listener and every
// connection it carries, so that whoever talks to an engine through it
// finds the engine gone, mid-conversation included.
type Proxy struct {
	// Addr is what clients dial: a socket path ("unix") or host:port
	// ("tcp").
	Addr string

	network, target string
	ln              net.Listener
	observe         func(chunk []byte, at time.Time)

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  chan struct{}
}

// StartProxy listens on network ("unix" or "tcp") at addr and forwards to
// the unix socket target.
func StartProxy(network, addr, target string) (*Proxy, error) {
	return StartObservedProxy(network, addr, target, nil)
}

// StartObservedProxy is StartProxy that also shows observe each chunk a
// client writes, with when it was read, before it is forwarded.
func StartObservedProxy(network, addr, target string, observe func(chunk []byte, at time.Time)) (*Proxy, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), network: network, target: target, ln: ln, observe: observe, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	go p.serve()
	return p, nil
}

func (p *Proxy) serve() {
	defer close(p.done)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false // stopped
	}
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *Proxy) forward(c net.Conn) {
	if !p.track(c, true) {
		c.Close()
		return
	}
	defer func() { p.track(c, false); c.Close() }()
	t, err := net.Dial("unix", p.target)
	if err != nil {
		return
	}
	if !p.track(t, true) {
		t.Close()
		return
	}
	defer func() { p.track(t, false); t.Close() }()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst net.Conn, src io.Reader) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
	var fromClient io.Reader = c
	if p.observe != nil {
		fromClient = observed{c, p.observe}
	}
	go pipe(t, fromClient)
	go pipe(c, t)
	wg.Wait()
}

// Stop closes the listener and every connection; a unix socket's file is
// removed. It returns once no new connection can be accepted.
func (p *Proxy) Stop() {
	p.ln.Close()
	<-p.done
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	if p.network == "unix" {
		_ = os.Remove(p.Addr) // net's unix listener has usually removed it
	}
}

// observed shows each chunk read to its observer.
type observed struct {
	r       io.Reader
	observe func(chunk []byte, at time.Time)
}

func (o observed) Read(b []byte) (int, error) {
	n, err := o.r.Read(b)
	if n > 0 {
		o.observe(b[:n], time.Now())
	}
	return n, err
}
