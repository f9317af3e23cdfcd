//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
)

// traceProxy forwards a unix socket to the engine's, and notes when the
// first request, and the first DELETE request, arrive after arm. The
// native watchdog speaks the engine's API from inside its process, with
// no program to catch at exec: pointing its owner (and so the watchdog,
// which inherits the owner's DOCKER_HOST) at this proxy is how the bench
// sees its removal call start. The hop costs the watchdog a little, so
// runs through it are kept apart from the crash-to-clean figures.
type traceProxy struct {
	Host  string // DOCKER_HOST for clients
	dir   string
	proxy *harness.Proxy

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
	p := &traceProxy{dir: dir}
	sock := filepath.Join(dir, "engine.sock")
	if p.proxy, err = harness.StartObservedProxy("unix", sock, u.Path, p.note); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.Host = "unix://" + sock
	return p, nil
}

func (p *traceProxy) Close() {
	p.proxy.Stop()
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
