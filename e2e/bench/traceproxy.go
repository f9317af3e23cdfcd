//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// traceProxy forwards a unix socket to the engine's, and notes when the
// first request, and the first DELETE request, arrive after arm. The
// native watchdog speaks the engine's API from inside its process, with
// no program to catch at exec: pointing its owner (and so the watchdog,
// which inherits the owner's DOCKER_HOST) at this proxy is how the bench
// sees its removal call start. The hop costs the watchdog a little, so
// runs through it are kept apart from the crash-to-clean figures.
type traceProxy struct {
	Host   string // DOCKER_HOST for clients
	dir    string
	target string
	ln     net.Listener

	mu            sync.Mutex
	armed         bool
	first, delete time.Time
	firstLine     string
}

func startTraceProxy(engineHost string) (*traceProxy, error) {
	u, err := url.Parse(engineHost)
	if err != nil || u.Scheme != "unix" {
		return nil, fmt.Errorf("engine %s: the native watchdog's trace needs an engine on a unix socket", engineHost)
	}
	dir, err := os.MkdirTemp("", "rz-bench-proxy-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p := &traceProxy{Host: "unix://" + sock, dir: dir, target: u.Path, ln: ln}
	go p.serve()
	return p, nil
}

func (p *traceProxy) Close() {
	p.ln.Close()
	os.RemoveAll(p.dir)
}

func (p *traceProxy) arm() {
	p.mu.Lock()
	p.armed, p.first, p.delete, p.firstLine = true, time.Time{}, time.Time{}, ""
	p.mu.Unlock()
}

// collect stops noting and returns when the first request after arm came
// (and its request line), and the first DELETE.
func (p *traceProxy) collect() (first time.Time, line string, del time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	return p.first, p.firstLine, p.delete
}

func (p *traceProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *traceProxy) forward(c net.Conn) {
	defer c.Close()
	t, err := net.Dial("unix", p.target)
	if err != nil {
		return
	}
	defer t.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, t)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		close(done)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.note(buf[:n], time.Now())
			if _, werr := t.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if cw, ok := t.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	<-done
}

// note looks at a chunk a client wrote: a request's head comes whole in
// one write from Go's HTTP client, so a request starts a chunk.
func (p *traceProxy) note(chunk []byte, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed {
		return
	}
	line, _, _ := bytes.Cut(chunk, []byte("\r\n"))
	if !bytes.Contains(line, []byte(" HTTP/1.")) {
		return // a body, not a request
	}
	if p.first.IsZero() {
		p.first, p.firstLine = at, string(line)
	}
	if p.delete.IsZero() && bytes.HasPrefix(line, []byte("DELETE ")) {
		p.delete = at
	}
}
