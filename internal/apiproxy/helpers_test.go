package apiproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// socketDir is a short private folder for sockets (a unix socket's path
// is limited to about 100 bytes: t.TempDir's can be longer).
func socketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "apx")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startProxy starts a proxy to upstream, closed when the test ends.
func startProxy(t testing.TB, upstream string, hook Hook) *Proxy {
	t.Helper()
	p, err := Start(filepath.Join(socketDir(t), "docker.sock"), upstream, hook)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// recHook records what it is told. Admit gives labels, and names[kind]
// for a create without a name; refuse refuses the names it lists.
type recHook struct {
	labels map[string]string
	names  map[string]string
	refuse []string

	mu      sync.Mutex
	admits  []string // "kind name"
	given   []map[string]string
	created []string // "kind name id"
	failed  []string // "kind name"
	status  []int    // of each Failed
	removed []string // "kind ref"
	// onRemoved, when set, is called by Removed (outside the lock).
	onRemoved func(kind, ref string)
}

func (h *recHook) Admit(ctx context.Context, kind, name string, labels map[string]string) (map[string]string, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.admits = append(h.admits, kind+" "+name)
	h.given = append(h.given, maps.Clone(labels))
	if slices.Contains(h.refuse, name) {
		return nil, "", fmt.Errorf("refused by the test: %s %q", kind, name)
	}
	use := ""
	if name == "" {
		use = h.names[kind]
	}
	return h.labels, use, nil
}

func (h *recHook) Created(kind, name, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.created = append(h.created, kind+" "+name+" "+id)
}

func (h *recHook) Failed(kind, name string, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = append(h.failed, kind+" "+name)
	h.status = append(h.status, status)
}

func (h *recHook) Removed(kind, ref string) {
	h.mu.Lock()
	h.removed = append(h.removed, kind+" "+ref)
	f := h.onRemoved
	h.mu.Unlock()
	if f != nil {
		f(kind, ref)
	}
}

// removals returns a copy of what Removed was told.
func (h *recHook) removals() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.removed)
}

// seen returns copies of what the hook was told.
func (h *recHook) seen() (admits, created, failed []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.admits), slices.Clone(h.created), slices.Clone(h.failed)
}

// fakeEngine is a unix socket whose connections handle serves.
type fakeEngine struct {
	path     string // its socket
	tcp      string // or its tcp address
	accepted atomic.Int32
	closed   atomic.Int32 // connections the engine closed (serverEngine's)
}

func newFakeEngine(t testing.TB, handle func(c net.Conn)) *fakeEngine {
	t.Helper()
	return newFakeEngineOn(t, "unix", handle)
}

// newFakeEngineOn is a fakeEngine on a unix socket, or on a loopback tcp
// port (network "tcp").
func newFakeEngineOn(t testing.TB, network string, handle func(c net.Conn)) *fakeEngine {
	t.Helper()
	e := &fakeEngine{path: filepath.Join(socketDir(t), "engine.sock")}
	if network == "tcp" {
		e.path = "127.0.0.1:0"
	}
	ln, err := net.Listen(network, e.path)
	if err != nil {
		t.Fatal(err)
	}
	if network == "tcp" {
		e.tcp = ln.Addr().String()
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return e
}

func (e *fakeEngine) addr() string {
	if e.tcp != "" {
		return "tcp://" + e.tcp
	}
	return "unix://" + e.path
}

// httpEngine is a fakeEngine served by net/http.
func httpEngine(t testing.TB, h http.HandlerFunc) *fakeEngine {
	t.Helper()
	return serverEngine(t, &http.Server{Handler: h})
}

// serverEngine is a fakeEngine served by srv.
func serverEngine(t testing.TB, srv *http.Server) *fakeEngine {
	t.Helper()
	e := &fakeEngine{path: filepath.Join(socketDir(t), "engine.sock")}
	ln, err := net.Listen("unix", e.path)
	if err != nil {
		t.Fatal(err)
	}
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			e.accepted.Add(1)
		case http.StateClosed:
			e.closed.Add(1)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return e
}

// unixClient is an HTTP client of the socket at addr ("unix://...").
func unixClient(addr string) *http.Client {
	path := strings.TrimPrefix(addr, "unix://")
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 4,
		DisableCompression:  true,
	}}
}

// dialRaw connects to the proxy, for a test that writes HTTP by hand.
func dialRaw(t testing.TB, p *Proxy) *net.UnixConn {
	t.Helper()
	c, err := net.Dial("unix", strings.TrimPrefix(p.Addr(), "unix://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c.(*net.UnixConn)
}

// readFull reads n bytes from r, or fails the test.
func readFull(t testing.TB, r io.Reader, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatalf("read %d bytes: %v (got %q)", n, err, b)
	}
	return string(b)
}

// readHeadRaw reads an HTTP head (through the blank line) from r.
func readHeadRaw(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		l, err := r.ReadString('\n')
		b.WriteString(l)
		if err != nil {
			return b.String(), err
		}
		if l == "\r\n" {
			return b.String(), nil
		}
	}
}

// within runs f, failing the test if it takes longer than d.
func within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: not done within %s", what, d)
	}
}
