//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// apiProxy stands between every process of the run and the engine's
// socket, request by request: it notes which process (its peer's pid)
// asked for each removal, so that a removal the engine's events show can
// be laid at a process's door; and, with -faults, it is the fault proxy.
// One upstream connection per client connection, HTTP/1.1 parsed on both
// sides; a hijacked stream (attach, exec) is copied as it is once the
// engine has said so.
type apiProxy struct {
	path, target string
	ln           net.Listener
	faults       *faults

	mu    sync.Mutex
	calls []apiCall
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// apiCall is one request the proxy saw that creates, stops or removes
// something.
type apiCall struct {
	at     time.Time
	pid    int
	method string
	target string // the container or network the path names ("" for a create)
	name   string // a create's ?name=
	kind   string // "container" or "network"
	verb   string // "create", "kill", "stop", "remove"
	fault  string // what the fault proxy did to it, if anything
	status int    // the engine's answer (0: none came)
	// sent: the request went on to the engine (the faults that answer in
	// its place, or never, send none).
	sent bool
	// heard: the engine's answer was written back to the asker's
	// connection (removal.unheard says what the checker makes of it).
	heard bool
}

func startProxy(path, target string, f *faults) (*apiProxy, error) {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	p := &apiProxy{path: path, target: target, ln: ln, faults: f, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *apiProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.handle(c) }()
	}
}

func (p *apiProxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

// peerPID is the pid of the process at the other end of unix conn c.
func peerPID(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	_ = raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

func (p *apiProxy) handle(c net.Conn) {
	if !p.track(c, true) {
		c.Close()
		return
	}
	defer func() { p.track(c, false); c.Close() }()
	pid := peerPID(c)
	var up net.Conn
	var upBr *bufio.Reader
	defer func() {
		if up != nil {
			p.track(up, false)
			up.Close()
		}
	}()
	br := bufio.NewReaderSize(c, 32<<10)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		call := classify(req, pid)
		f := p.faults.decide(req)
		idx := -1
		if call.verb != "" {
			call.fault = f.String()
			p.mu.Lock()
			idx = len(p.calls)
			p.calls = append(p.calls, call)
			p.mu.Unlock()
		}
		if f.kind == faultLatency {
			time.Sleep(f.d)
		}
		switch f.kind {
		case faultError:
			_, _ = io.Copy(io.Discard, req.Body)
			body := `{"message":"chaos: a fault the harness injected"}`
			fmt.Fprintf(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
			return
		case faultReset:
			reset(c)
			return
		case faultHang:
			// Silent: the request is read, never answered, until the
			// client gives up or the hang ends.
			select {
			case <-time.After(f.d):
			case <-p.faults.done:
			}
			reset(c)
			return
		}
		if up == nil {
			up, err = net.Dial("unix", p.target)
			if err != nil {
				reset(c)
				return
			}
			if !p.track(up, true) {
				return
			}
			upBr = bufio.NewReaderSize(up, 32<<10)
		}
		if err := req.Write(up); err != nil {
			return
		}
		if idx >= 0 {
			p.mu.Lock()
			p.calls[idx].sent = true
			p.mu.Unlock()
		}
		resp, err := http.ReadResponse(upBr, req)
		if err != nil {
			return // no answer came: the client hears of none
		}
		if idx >= 0 {
			p.mu.Lock()
			p.calls[idx].status = resp.StatusCode
			p.mu.Unlock()
		}
		if f.kind == faultLost {
			// The engine did it; the answer never comes.
			resp.Body.Close()
			reset(c)
			return
		}
		if resp.StatusCode == http.StatusSwitchingProtocols || strings.HasPrefix(resp.Header.Get("Content-Type"), "application/vnd.docker.raw-stream") ||
			strings.HasPrefix(resp.Header.Get("Content-Type"), "application/vnd.docker.multiplexed-stream") && req.Method == http.MethodPost {
			p.hijacked(c, br, up, upBr, resp)
			return
		}
		werr := resp.Write(c)
		resp.Body.Close()
		if idx >= 0 {
			p.mu.Lock()
			p.calls[idx].heard = werr == nil
			p.mu.Unlock()
		}
		if werr != nil || resp.Close || req.Close {
			return
		}
	}
}

// hijacked writes the engine's answer head, then copies both ways as the
// stream it has become.
func (p *apiProxy) hijacked(c net.Conn, br *bufio.Reader, up net.Conn, upBr *bufio.Reader, resp *http.Response) {
	fmt.Fprintf(c, "HTTP/%d.%d %s\r\n", resp.ProtoMajor, resp.ProtoMinor, resp.Status)
	_ = resp.Header.Write(c)
	_, _ = io.WriteString(c, "\r\n")
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, upBr); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// reset ends c at once, as a connection the engine dropped.
func reset(c net.Conn) {
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.SetDeadline(time.Now())
	}
	c.Close()
}

// classify says what a request does to which object, for the calls the
// harness lays removals at the door of.
func classify(req *http.Request, pid int) apiCall {
	call := apiCall{at: time.Now(), pid: pid, method: req.Method}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// Drop a version prefix (v1.41) and libpod's.
	for len(parts) > 0 && (strings.HasPrefix(parts[0], "v1.") || strings.HasPrefix(parts[0], "v4.") || strings.HasPrefix(parts[0], "v5.") || parts[0] == "libpod") {
		parts = parts[1:]
	}
	if len(parts) < 2 {
		return call
	}
	switch parts[0] {
	case "containers":
		call.kind = "container"
	case "networks":
		call.kind = "network"
	default:
		return call
	}
	switch {
	case parts[1] == "create" && req.Method == http.MethodPost:
		call.verb = "create"
		call.name = req.URL.Query().Get("name")
	case len(parts) == 2 && req.Method == http.MethodDelete:
		call.verb, call.target = "remove", unescape(parts[1])
	case len(parts) == 3 && req.Method == http.MethodPost && (parts[2] == "kill" || parts[2] == "stop"):
		call.verb, call.target = parts[2], unescape(parts[1])
	}
	return call
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// remover is the request that removed the object with id or name, as
// the engine's event at at shows it gone: of the removals asked for
// before then, the last the engine answered with success, else the last
// one (its answer never came, or was not seen).
func (p *apiProxy) remover(kind, id, name string, at time.Time) apiCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last apiCall
	for i := len(p.calls) - 1; i >= 0; i-- {
		c := p.calls[i]
		if c.verb != "remove" || c.kind != kind || c.at.After(at.Add(50*time.Millisecond)) {
			continue
		}
		if c.target == name || c.target == strings.TrimPrefix(name, "/") || len(c.target) >= 12 && strings.HasPrefix(id, c.target) {
			if c.status >= 200 && c.status < 300 {
				return c
			}
			if last.verb == "" {
				last = c
			}
		}
	}
	return last
}

// touches are the requests to stop, kill or remove the container.
func (p *apiProxy) touches(id, name string) []apiCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []apiCall
	for _, c := range p.calls {
		if c.kind != "container" || c.verb == "create" {
			continue
		}
		if c.target == name || len(c.target) >= 12 && strings.HasPrefix(id, c.target) {
			out = append(out, c)
		}
	}
	return out
}

// creator is the process that asked for the create of name.
func (p *apiProxy) creator(kind, name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.calls) - 1; i >= 0; i-- {
		c := p.calls[i]
		if c.verb == "create" && c.kind == kind && c.name == name {
			return c.pid
		}
	}
	return 0
}

// stop closes the listener and every connection.
func (p *apiProxy) stop() {
	p.ln.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	_ = os.Remove(p.path)
}

// dump writes every call the proxy took note of, for a person's look.
func (p *apiProxy) dump(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, c := range p.calls {
		fmt.Fprintf(&b, "%s pid %d %s %s %s %s name=%s fault=%s sent=%t status=%d heard=%t\n", c.at.Format(time.RFC3339Nano), c.pid, c.method, c.kind, c.verb, c.target, c.name, c.fault, c.sent, c.status, c.heard)
	}
	_ = os.WriteFile(path, []byte(b.String()), 0o600)
}
