package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
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
	c, err := readConfig(env(envRun, "r1", envNonce, "n", envLease, testHash, envTimeout, "2s"))
	if err != nil || c.run != "r1" || c.timeout != 2*time.Second || c.first != 0 || c.socket != defaultSocket || c.settle != defaultSettle {
		t.Errorf("readConfig: %+v, %v", c, err)
	}
	c, err = readConfig(env(envRun, "r1", envNonce, "n", envLease, testHash, envTimeout, "2s", envFirst, "30s"))
	if err != nil || c.timeout != 2*time.Second || c.first != 30*time.Second {
		t.Errorf("readConfig with %s: %+v, %v", envFirst, c, err)
	}
	for _, bad := range []func(string) string{
		env(envNonce, "n", envLease, testHash, envTimeout, "2s"),
		env(envRun, "r1", envLease, testHash, envTimeout, "2s"),
		env(envRun, "r1", envNonce, "n", envTimeout, "2s"),
		env(envRun, "r1", envNonce, "n", envLease, "abc", envTimeout, "2s"),
		env(envRun, "r1", envNonce, "n", envLease, strings.ToUpper(testHash), envTimeout, "2s"),
		env(envRun, "r1", envNonce, "n", envLease, testHash),
		env(envRun, "r1", envNonce, "n", envLease, testHash, envTimeout, "0s"),
		env(envRun, "r1", envNonce, "n", envLease, testHash, envTimeout, "2s", envSettle, "-1s"),
		env(envRun, "r1", envNonce, "n", envLease, testHash, envTimeout, "2s", envFirst, "0s"),
		env(envRun, "r1", envNonce, "n", envLease, testHash, envTimeout, "2s", envFirst, "soon"),
	} {
		if c, err := readConfig(bad); err == nil {
			t.Errorf("readConfig took %+v", c)
		}
	}
}

// testSecret is the lease's secret in these tests; testHash its hash.
const testSecret = "0123456789abcdef0123456789abcdef"

var testHash = func() string {
	sum := sha256.Sum256([]byte(testSecret))
	return hex.EncodeToString(sum[:])
}()

// leaseSock listens on a unix socket of the test's own, standing for the
// keeper's abstract one (which only Linux has).
func leaseSock(t *testing.T) (net.Listener, func() (net.Conn, error)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lease.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, func() (net.Conn, error) { return net.Dial("unix", path) }
}

type leaseEnd struct {
	why  string
	reap bool
}

func runLease(ln net.Listener, out io.Writer, lc leaseConfig, stop, ignored chan os.Signal) chan leaseEnd {
	if lc.hash == "" {
		lc.hash = testHash
	}
	done := make(chan leaseEnd, 1)
	go func() {
		why, reap := lease(ln, out, lc, stop, ignored)
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

func noEnd(t *testing.T, done chan leaseEnd, what string) {
	t.Helper()
	select {
	case e := <-done:
		t.Fatalf("the lease ended after %s: %+v", what, e)
	default:
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

// say connects, writes hello (when not ""), and returns the connection and
// the keeper's answer ("" when it closed without one).
func say(t *testing.T, dial func() (net.Conn, error), hello string) (net.Conn, string) {
	t.Helper()
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if hello != "" {
		if _, err := io.WriteString(c, hello); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.SetReadDeadline(time.Time{})
	return c, strings.TrimSpace(line)
}

func TestLeaseEndsWhenItsHolderCloses(t *testing.T) {
	ln, dial := leaseSock(t)
	out := &syncBuffer{lines: make(chan string, 8)}
	done := runLease(ln, out, leaseConfig{timeout: time.Hour}, make(chan os.Signal), make(chan os.Signal))
	c, answer := say(t, dial, "hold "+testSecret+"\n")
	if answer != "held" {
		t.Fatalf("the answer to the hello is %q", answer)
	}
	select {
	case l := <-out.lines:
		if l != "held\n" {
			t.Fatalf("the keeper said %q on its stdout", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper said nothing of its holder")
	}
	c.Close()
	if e := wantEnd(t, done, 10*time.Second); !e.reap || !strings.Contains(e.why, "closed") {
		t.Errorf("the lease ended %+v; want a removal for its holder's connection's end", e)
	}
}

// Heartbeats keep the lease for longer than its timeout; then their end
// ends it, one timeout after the last.
func TestLeaseTimesOut(t *testing.T) {
	ln, dial := leaseSock(t)
	const timeout = 300 * time.Millisecond
	done := runLease(ln, io.Discard, leaseConfig{timeout: timeout}, make(chan os.Signal), make(chan os.Signal))
	c, answer := say(t, dial, "hold "+testSecret+"\n")
	if answer != "held" {
		t.Fatalf("the answer to the hello is %q", answer)
	}
	until := time.Now().Add(4 * timeout)
	var last time.Time
	for time.Now().Before(until) {
		// Taken before the write: the keeper may read the beat, and
		// start its timeout, before the write returns here (seen in CI:
		// 299.2 ms measured from after it).
		last = time.Now()
		if _, err := c.Write([]byte{'.'}); err != nil {
			t.Fatal(err)
		}
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
	ln, _ := leaseSock(t)
	e := wantEnd(t, runLease(ln, io.Discard, leaseConfig{timeout: 200 * time.Millisecond}, make(chan os.Signal), make(chan os.Signal)), 10*time.Second)
	if !e.reap || !strings.Contains(e.why, "nobody held the lease within 200ms") {
		t.Errorf("the lease ended %+v; want a removal for nobody holding it", e)
	}
}

// The first holder has its own wait, longer than the lease timeout: an
// engine under load takes longer to start the holder's exec than a short
// lease lasts. Once held, the lease timeout counts.
func TestLeaseFirstHold(t *testing.T) {
	ln, dial := leaseSock(t)
	const timeout = 200 * time.Millisecond
	started := time.Now()
	done := runLease(ln, io.Discard, leaseConfig{timeout: timeout, first: 10 * timeout}, make(chan os.Signal), make(chan os.Signal))
	select {
	case e := <-done:
		t.Fatalf("the lease ended %+v after %s, before its first holder's wait (%s)", e, time.Since(started), 10*timeout)
	case <-time.After(5 * timeout):
	}
	if _, answer := say(t, dial, "hold "+testSecret+"\n"); answer != "held" {
		t.Fatalf("the answer to a hello after %s is %q", time.Since(started), answer)
	}
	if e := wantEnd(t, done, 10*time.Second); !e.reap || e.why != "no heartbeat for "+timeout.String() {
		t.Errorf("the lease ended %+v; want a removal for no heartbeat for %s", e, timeout)
	}
}

func TestLeaseNobodyHoldsFirst(t *testing.T) {
	ln, _ := leaseSock(t)
	started := time.Now()
	e := wantEnd(t, runLease(ln, io.Discard, leaseConfig{timeout: 100 * time.Millisecond, first: 600 * time.Millisecond}, make(chan os.Signal), make(chan os.Signal)), 10*time.Second)
	if took := time.Since(started); !e.reap || !strings.Contains(e.why, "nobody held the lease within 600ms") || took < 600*time.Millisecond {
		t.Errorf("the lease ended %+v after %s; want a removal for nobody holding it within 600ms", e, took)
	}
}

// SIGTERM ends the keeper without a removal; what a docker attach passes
// on from a terminal (SIGINT, SIGHUP, SIGQUIT) changes nothing.
func TestLeaseSignals(t *testing.T) {
	ln, dial := leaseSock(t)
	stop, ignored := make(chan os.Signal, 1), make(chan os.Signal, 3)
	done := runLease(ln, io.Discard, leaseConfig{timeout: time.Hour}, stop, ignored)
	if _, answer := say(t, dial, "hold "+testSecret+"\n"); answer != "held" {
		t.Fatalf("the answer to the hello is %q", answer)
	}
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		ignored <- s
	}
	// Answered only once the loop took the signals above.
	if _, answer := say(t, dial, "hold "+testSecret+"\n"); !strings.HasPrefix(answer, "refused") {
		t.Fatalf("a second holder was answered %q", answer)
	}
	noEnd(t, done, "SIGINT, SIGHUP and SIGQUIT")
	stop <- syscall.SIGTERM
	if e := wantEnd(t, done, 10*time.Second); e.reap {
		t.Errorf("a signal ended the lease with a removal: %+v", e)
	}
}

// Only the holder with the secret ends the lease: a connection that says
// nothing and closes, one that says something else, one with another
// secret, and a second holder with the secret while one holds it, are
// each answered and closed, and change nothing; the holder's heartbeats
// keep the lease past its timeout meanwhile.
func TestLeaseRefusesOthers(t *testing.T) {
	ln, dial := leaseSock(t)
	const timeout = 2 * time.Second
	done := runLease(ln, io.Discard, leaseConfig{timeout: timeout}, make(chan os.Signal), make(chan os.Signal))
	holder, answer := say(t, dial, "hold "+testSecret+"\n")
	if answer != "held" {
		t.Fatalf("the answer to the hello is %q", answer)
	}
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for range 3 * 5 {
			if _, err := holder.Write([]byte{'.'}); err != nil {
				return
			}
			time.Sleep(timeout / 5)
		}
	}()
	for _, tc := range []struct{ what, hello, want string }{
		{"nothing, then its end", "", ""},
		{"its end mid-line", "hold " + testSecret[:5], ""},
		{"another word", "let go " + testSecret + "\n", "refused: not a hello"},
		{"another secret", "hold " + strings.Repeat("f", len(testSecret)) + "\n", "refused: not this lease's secret"},
		{"no secret", "hold\n", "refused: not this lease's secret"},
		{"a line too long", "hold " + strings.Repeat("a", 4*maxHello) + "\n", "refused: no hello"},
		{"the secret, while held", "hold " + testSecret + "\n", "refused: another holder holds the lease"},
	} {
		c, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, tc.hello)
		if tc.want == "" {
			c.Close()
			continue
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.HasPrefix(strings.TrimSpace(line), tc.want) {
			t.Errorf("%s: answered %q, want %q", tc.what, line, tc.want)
		}
		noEnd(t, done, tc.what)
	}
	<-beats // three lease timeouts of heartbeats
	noEnd(t, done, "three lease timeouts of heartbeats and the strangers")
	holder.Close()
	if e := wantEnd(t, done, 10*time.Second); !e.reap || !strings.Contains(e.why, "closed") {
		t.Errorf("the lease ended %+v; want a removal for its holder's end", e)
	}
}

// A keeper that cannot reach its engine tells a holder why, and takes
// none.
func TestLeaseRefusedWithoutAnEngine(t *testing.T) {
	ln, dial := leaseSock(t)
	done := runLease(ln, io.Discard, leaseConfig{timeout: time.Hour, refuse: errors.New("no engine")}, make(chan os.Signal), make(chan os.Signal))
	if _, answer := say(t, dial, "hold "+testSecret+"\n"); answer != "error: no engine" {
		t.Fatalf("the answer to the hello is %q", answer)
	}
	noEnd(t, done, "a holder refused")
}

// "keeper hold" carries its stdin to the lease: the secret, then the
// heartbeats; the keeper's answer goes to its stdout. Its stdin's end
// ends the lease; a stdin that ends before the secret reaches nothing.
func TestHold(t *testing.T) {
	ln, dial := leaseSock(t)
	const timeout = time.Second
	done := runLease(ln, io.Discard, leaseConfig{timeout: timeout}, make(chan os.Signal), make(chan os.Signal))

	if code := hold(strings.NewReader(""), io.Discard, dial); code != exitConfig {
		t.Errorf("hold with an empty stdin: exit %d, want %d", code, exitConfig)
	}
	var refused strings.Builder
	if code := hold(strings.NewReader("not the secret\n"), &refused, dial); code != exitLeft || !strings.HasPrefix(refused.String(), "refused") {
		t.Errorf("hold with another secret: exit %d, said %q", code, refused.String())
	}
	noEnd(t, done, "holds that were refused")

	inR, inW := io.Pipe()
	out := &syncBuffer{lines: make(chan string, 8)}
	exited := make(chan int, 1)
	go func() { exited <- hold(inR, out, dial) }()
	io.WriteString(inW, testSecret+"\n")
	select {
	case l := <-out.lines:
		if l != "held\n" {
			t.Fatalf("hold said %q", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("hold said nothing")
	}
	for range 3 * 5 {
		if _, err := inW.Write([]byte{'.'}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(timeout / 5)
	}
	noEnd(t, done, "three lease timeouts of heartbeats through hold")
	inW.Close()
	if e := wantEnd(t, done, 10*time.Second); !e.reap || !strings.Contains(e.why, "closed") {
		t.Errorf("the lease ended %+v; want a removal for its holder's end", e)
	}
	select {
	case code := <-exited:
		if code != exitClean {
			t.Errorf("hold exited %d after its stdin ended", code)
		}
	case <-time.After(10 * time.Second):
		t.Error("hold did not exit after its stdin ended")
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
