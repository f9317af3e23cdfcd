package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		name, raw, method string
		code              int
		body              string
		bad               bool
		hdr, hdrValue     string
	}{
		{"by length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "GET", 200, "hello", false, "", ""},
		{"Podman's ping", "HTTP/1.1 200 OK\r\nLibpod-Api-Version:  4.3.1 \r\nContent-Length: 2\r\n\r\nOK", "GET", 200, "OK", false, "Libpod-Api-Version", "4.3.1"},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\nTrailer: 1\r\n\r\n", "GET", 200, "hello", false, "", ""},
		{"to the end", "HTTP/1.0 200 OK\r\n\r\nhello", "GET", 200, "hello", false, "", ""},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", "DELETE", 204, "", false, "", ""},
		{"an interim answer first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}", "GET", 404, "{}", false, "", ""},
		{"LF line ends", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", "GET", 200, "ok", false, "", ""},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", "GET", 0, "", true, "", ""},
		{"no status", "HTTP/1.1 OK\r\n\r\n", "GET", 0, "", true, "", ""},
		{"cut short", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", "GET", 0, "", true, "", ""},
		{"bad chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "GET", 0, "", true, "", ""},
		{"too long", "HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n", "GET", 0, "", true, "", ""},
		{"a header longer than the buffer", "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 8000) + "\r\n\r\n", "GET", 0, "", true, "", ""},
		{"nothing", "", "GET", 0, "", true, "", ""},
	} {
		code, hdr, body, err := readResponse(bufio.NewReader(strings.NewReader(tc.raw)), tc.method)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: read %d %q, want an error", tc.name, code, body)
			}
			continue
		}
		if err != nil || code != tc.code || string(body) != tc.body {
			t.Errorf("%s: %d %q %v, want %d %q", tc.name, code, body, err, tc.code, tc.body)
		}
		if tc.hdr != "" && hdr[strings.ToLower(tc.hdr)] != tc.hdrValue {
			t.Errorf("%s: header %s is %q, want %q (headers %v)", tc.name, tc.hdr, hdr[strings.ToLower(tc.hdr)], tc.hdrValue, hdr)
		}
	}
}

func TestOwned(t *testing.T) {
	const run = "abcd1234"
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   bool
		reason string
	}{
		{"/rz-abcd1234-1", map[string]string{labelRun: run, labelRunAlt: run}, true, "both spellings"},
		{"rz-abcd1234-1", map[string]string{labelRun: run}, true, "Kotlin and Node's spelling"},
		{"x", map[string]string{labelRunAlt: run}, true, "Rust's spelling; the name does not matter"},
		{"rz-abcd1234-1", nil, false, "no label, whatever the name"},
		{"x", map[string]string{labelRun: run + "0"}, false, "another run"},
		{"x", map[string]string{labelRun: "other", labelRunAlt: run}, true, "either spelling naming the run is enough"},
		{"x", map[string]string{labelRun: run, labelReuse: "0123456789ab"}, false, "a keep-alive sandbox, even with the run's label"},
		{"x", map[string]string{labelRun: run, labelReuse + ".go": "1"}, false, "any dev.rightsize.reuse* label marks a keep-alive"},
		{"/rz-reuse-0123456789ab", map[string]string{labelRun: run}, false, "a keep-alive by its name"},
		{"x", map[string]string{labelRun: run, labelKeeper: run}, false, "a keeper"},
	} {
		if got := owned(run, tc.name, tc.labels); got != tc.want {
			t.Errorf("owned(%q, %v) = %v, want %v: %s", tc.name, tc.labels, got, tc.want, tc.reason)
		}
	}
	if owned("", "x", map[string]string{labelRun: ""}) {
		t.Error("an empty run id owns what has an empty label")
	}
}

func TestReadConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := readConfig(env(envRun, "r1", envNonce, "n", envTimeout, "2s"))
	if err != nil || c.run != "r1" || c.timeout != 2*time.Second || c.socket != defaultSocket || c.settle != defaultSettle {
		t.Errorf("readConfig: %+v, %v", c, err)
	}
	for _, bad := range []func(string) string{
		env(envNonce, "n", envTimeout, "2s"),
		env(envRun, "r1", envTimeout, "2s"),
		env(envRun, "r1", envNonce, "n"),
		env(envRun, "r1", envNonce, "n", envTimeout, "0s"),
		env(envRun, "r1", envNonce, "n", envTimeout, "2s", envSettle, "-1s"),
	} {
		if c, err := readConfig(bad); err == nil {
			t.Errorf("readConfig took %+v", c)
		}
	}
}

// stdinPipe is a lease's stdin the test writes.
func stdinPipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

type leaseEnd struct {
	why  string
	reap bool
}

func runLease(in io.Reader, out io.Writer, timeout time.Duration, stop chan os.Signal) chan leaseEnd {
	done := make(chan leaseEnd, 1)
	go func() {
		why, reap := lease(in, out, timeout, stop)
		done <- leaseEnd{why, reap}
	}()
	return done
}

func wantEnd(t *testing.T, done chan leaseEnd, within time.Duration) leaseEnd {
	t.Helper()
	select {
	case e := <-done:
		return e
	case <-time.After(within):
		t.Fatalf("the lease did not end within %s", within)
		return leaseEnd{}
	}
}

// syncBuffer is an output the lease writes to and the test reads.
type syncBuffer struct {
	lines chan string
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.lines <- string(p)
	return len(p), nil
}

func TestLeaseEndsOnEOF(t *testing.T) {
	r, w := stdinPipe(t)
	out := &syncBuffer{lines: make(chan string, 8)}
	done := runLease(r, out, time.Hour, make(chan os.Signal))
	if _, err := w.Write([]byte{hello}); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-out.lines:
		if l != "held\n" {
			t.Fatalf("the answer to hello is %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to hello")
	}
	w.Close()
	if e := wantEnd(t, done, 10*time.Second); !e.reap || !strings.Contains(e.why, "ended") {
		t.Errorf("the lease ended %+v; want a removal for its stdin's end", e)
	}
}

// Heartbeats keep the lease for longer than its timeout; then their end
// ends it, one timeout after the last.
func TestLeaseTimesOut(t *testing.T) {
	r, w := stdinPipe(t)
	const timeout = 300 * time.Millisecond
	done := runLease(r, io.Discard, timeout, make(chan os.Signal))
	until := time.Now().Add(4 * timeout)
	var last time.Time
	for time.Now().Before(until) {
		if _, err := w.Write([]byte{'.'}); err != nil {
			t.Fatal(err)
		}
		last = time.Now()
		select {
		case e := <-done:
			t.Fatalf("the lease ended while heartbeats came: %+v", e)
		case <-time.After(timeout / 5):
		}
	}
	e := wantEnd(t, done, 10*time.Second)
	if took := time.Since(last); !e.reap || !strings.Contains(e.why, "no heartbeat") || took < timeout {
		t.Errorf("the lease ended %+v, %s after the last heartbeat; want a removal for no heartbeat after %s", e, took, timeout)
	}
}

func TestLeaseNobodyHolds(t *testing.T) {
	r, _ := stdinPipe(t)
	e := wantEnd(t, runLease(r, io.Discard, 200*time.Millisecond, make(chan os.Signal)), 10*time.Second)
	if !e.reap || !strings.Contains(e.why, "nobody held") {
		t.Errorf("the lease ended %+v; want a removal for nobody holding it", e)
	}
}

func TestLeaseSignalRemovesNothing(t *testing.T) {
	r, _ := stdinPipe(t)
	stop := make(chan os.Signal, 1)
	done := runLease(r, io.Discard, time.Hour, stop)
	stop <- syscall.SIGTERM
	if e := wantEnd(t, done, 10*time.Second); e.reap {
		t.Errorf("a signal ended the lease with a removal: %+v", e)
	}
}

// An engine that takes the connection and never answers costs the call
// its timeout, never a hang.
func TestSilentEngine(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "silent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Each connection is kept open, unanswered, until the test ends.
	held := make(chan net.Conn, 16)
	defer func() {
		ln.Close()
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	e := &engine{socket: sock, timeout: 300 * time.Millisecond}
	start := time.Now()
	_, err = e.check("r1", "n")
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("check against a silent engine: %v; want a timeout", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("check against a silent engine took %s", took)
	}
}
