package apiproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/proctest"
)

// These tests run the proxy against fake engines (no Docker needed): the
// byte-level promises (nothing altered, streaming, upgrades, half-closes)
// are checked where every byte is known. engine_test.go checks the same
// against the real engine and its clients.

// exchanges are requests and answers of several framings, none a create.
var exchanges = []struct{ req, resp string }{
	{
		"GET /v1.41/containers/json?all=1&filters=%7B%22label%22%3A%5B%22a%3Db%22%5D%7D HTTP/1.1\r\nHost: docker\r\nuser-agent: odd-Case\r\nX-B: 2\r\nX-A: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Type: application/json\r\nContent-Length: 2\r\nx-lower: kept\r\n\r\n[]",
	},
	{
		"POST /v1.41/build?t=x HTTP/1.1\r\nHost: docker\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n3\r\n{}\n\r\na\r\n0123456789\r\n0\r\n\r\n",
	},
	{
		"HEAD /_ping HTTP/1.1\r\nHost: docker\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nApi-Version: 1.41\r\n\r\n",
	},
	{
		"DELETE /v1.41/containers/x?force=1 HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nDate: x\r\n\r\n",
	},
	{
		"POST /v1.41/containers/abc/start HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\nnull",
		"HTTP/1.1 304 Not Modified\r\n\r\n",
	},
	{
		// A create's path, but a GET: not intercepted.
		"GET /v1.41/containers/create?name=x HTTP/1.1\r\nHost: docker\r\n\r\n",
		"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n",
	},
}

func TestForwardsByteForByte(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) { testForwardsByteForByte(t, network) })
	}
}

func testForwardsByteForByte(t *testing.T, network string) {
	got := make(chan string, len(exchanges))
	e := newFakeEngineOn(t, network, func(c net.Conn) {
		for _, x := range exchanges {
			b := make([]byte, len(x.req))
			if _, err := io.ReadFull(c, b); err != nil {
				got <- fmt.Sprintf("read: %v (%q)", err, b)
				return
			}
			got <- string(b)
			io.WriteString(c, x.resp)
		}
	})
	p := startProxy(t, e.addr(), &recHook{})
	c := dialRaw(t, p)
	for i, x := range exchanges {
		io.WriteString(c, x.req)
		if g := <-got; g != x.req {
			t.Fatalf("exchange %d: the engine got\n%q\nwant\n%q", i, g, x.req)
		}
		if g := readFull(t, c, len(x.resp)); g != x.resp {
			t.Fatalf("exchange %d: the client got\n%q\nwant\n%q", i, g, x.resp)
		}
	}
	if n := e.accepted.Load(); n != 1 {
		t.Errorf("the engine was connected to %d times, want 1 (keep-alive)", n)
	}
}

func TestPipelinedRequests(t *testing.T) {
	var all strings.Builder
	for _, x := range exchanges {
		all.WriteString(x.req)
	}
	e := newFakeEngine(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for _, x := range exchanges {
			if _, err := io.ReadFull(r, make([]byte, len(x.req))); err != nil {
				return
			}
			io.WriteString(c, x.resp)
		}
	})
	p := startProxy(t, e.addr(), &recHook{})
	c := dialRaw(t, p)
	io.WriteString(c, all.String())
	for i, x := range exchanges {
		if g := readFull(t, c, len(x.resp)); g != x.resp {
			t.Fatalf("answer %d: got %q, want %q", i, g, x.resp)
		}
	}
}

func TestStreamsAnswers(t *testing.T) {
	for _, tc := range []struct{ name, head, first, rest string }{
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "6\r\nfirst\n\r\n", "7\r\nsecond\n\r\n0\r\n\r\n"},
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n", "first\n", "second\n"},
		{"close-delimited", "HTTP/1.1 200 OK\r\n\r\n", "first\n", "second\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goOn := make(chan struct{})
			e := newFakeEngine(t, func(c net.Conn) {
				if _, err := readHeadRaw(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, tc.head+tc.first)
				<-goOn
				io.WriteString(c, tc.rest)
			})
			p := startProxy(t, e.addr(), &recHook{})
			resp, err := unixClient(p.Addr()).Get("http://docker/v1.41/containers/x/logs?follow=1")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			within(t, 5*time.Second, "the first part of the answer", func() {
				if g := readFull(t, resp.Body, len("first\n")); g != "first\n" {
					t.Errorf("got %q", g)
				}
			})
			close(goOn)
			rest, err := io.ReadAll(resp.Body)
			if err != nil || string(rest) != "second\n" {
				t.Errorf("rest: %q, %v", rest, err)
			}
		})
	}
}

func TestStreamsRequestBody(t *testing.T) {
	firstIn := make(chan string, 1)
	e := httpEngine(t, func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 5)
		io.ReadFull(r.Body, b)
		firstIn <- string(b)
		rest, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s|%s", b, rest)
	})
	p := startProxy(t, e.addr(), &recHook{})
	pr, pw := io.Pipe()
	type result struct {
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := unixClient(p.Addr()).Post("http://docker/v1.41/images/load", "application/x-tar", pr)
		if err != nil {
			res <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		res <- result{string(b), err}
	}()
	io.WriteString(pw, "part1")
	select {
	case g := <-firstIn:
		if g != "part1" {
			t.Errorf("the engine got %q first", g)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first part of a streamed body did not reach the engine")
	}
	io.WriteString(pw, "part2")
	pw.Close()
	r := <-res
	if r.err != nil || r.body != "part1|part2" {
		t.Errorf("answer %q, %v", r.body, r.err)
	}
}

const upgradeReq = "POST /v1.41/exec/abc/start HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: 29\r\n\r\n{\"Detach\":false,\"Tty\":false}\n"

const upgradeResp = "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"

// TestUpgradeHalfClose: the client half-closes; the engine reads
// end-of-file and still answers. Over a unix and a tcp upstream.
func TestUpgradeHalfClose(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			gotReq := make(chan string, 1)
			e := newFakeEngineOn(t, network, func(c net.Conn) {
				b := make([]byte, len(upgradeReq))
				io.ReadFull(c, b)
				gotReq <- string(b)
				io.WriteString(c, upgradeResp)
				in, _ := io.ReadAll(c) // to the client's half-close
				io.WriteString(c, "got:"+string(in))
			})
			p := startProxy(t, e.addr(), &recHook{})
			c := dialRaw(t, p)
			io.WriteString(c, upgradeReq)
			if g := <-gotReq; g != upgradeReq {
				t.Fatalf("the engine got %q", g)
			}
			r := bufio.NewReader(c)
			if h, err := readHeadRaw(r); err != nil || h != upgradeResp {
				t.Fatalf("head %q, %v", h, err)
			}
			io.WriteString(c, "hello ")
			io.WriteString(c, "world")
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			within(t, 5*time.Second, "the answer after a half-close", func() {
				out, err := io.ReadAll(r)
				if err != nil || string(out) != "got:hello world" {
					t.Errorf("got %q, %v", out, err)
				}
			})
		})
	}
}

// TestUpgradeHalfCloseFromEngine: the engine half-closes (with bytes sent
// along with its 101); the client reads end-of-file and may still write.
func TestUpgradeHalfCloseFromEngine(t *testing.T) {
	late := make(chan string, 1)
	e := newFakeEngine(t, func(c net.Conn) {
		io.ReadFull(c, make([]byte, len(upgradeReq)))
		io.WriteString(c, upgradeResp+"early")
		c.(*net.UnixConn).CloseWrite()
		in, _ := io.ReadAll(c)
		late <- string(in)
	})
	p := startProxy(t, e.addr(), &recHook{})
	c := dialRaw(t, p)
	io.WriteString(c, upgradeReq)
	r := bufio.NewReader(c)
	if h, err := readHeadRaw(r); err != nil || h != upgradeResp {
		t.Fatalf("head %q, %v", h, err)
	}
	within(t, 5*time.Second, "end-of-file from the engine's half-close", func() {
		out, err := io.ReadAll(r)
		if err != nil || string(out) != "early" {
			t.Errorf("got %q, %v", out, err)
		}
	})
	io.WriteString(c, "late")
	c.CloseWrite()
	select {
	case g := <-late:
		if g != "late" {
			t.Errorf("the engine got %q after its half-close", g)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client's bytes after the engine's half-close did not arrive")
	}
}

// TestRawStreamForOlderClients: an attach without Upgrade is answered 200
// and a raw stream, both ways; the client's stdin follows its request at
// once.
func TestRawStreamForOlderClients(t *testing.T) {
	const req = "POST /v1.41/containers/abc/attach?stream=1&stdin=1&stdout=1 HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\n\r\n"
	const head = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.raw-stream\r\n\r\n"
	e := newFakeEngine(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		io.ReadFull(r, make([]byte, len(req)))
		io.WriteString(c, head)
		in, _ := io.ReadAll(r)
		io.WriteString(c, "got:"+string(in))
	})
	p := startProxy(t, e.addr(), &recHook{})
	c := dialRaw(t, p)
	io.WriteString(c, req+"stdin-data")
	c.CloseWrite()
	within(t, 5*time.Second, "the raw stream", func() {
		out, err := io.ReadAll(c)
		if want := head + "got:stdin-data"; err != nil || string(out) != want {
			t.Errorf("got %q, %v; want %q", out, err, want)
		}
	})
}

// TestNoPipeButTakeOvers: an answer whose body ends with the connection
// is forwarded to its end, then the connection closes: what the client
// sends after it (a create) never reaches an engine that would go on
// reading requests. A CONNECT answered 200 is no take-over either: its
// answer is read by its framing, and the create after it is guarded.
func TestNoPipeButTakeOvers(t *testing.T) {
	const create = "POST /containers/create?name=late HTTP/1.1\r\nHost: docker\r\nContent-Length: 2\r\n\r\n{}"
	for _, tc := range []struct{ name, req, answer string }{
		{"close-delimited", "GET /v1.41/info HTTP/1.1\r\nHost: docker\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\nbody"},
		{"close-delimited CONNECT", "CONNECT /debug/vars HTTP/1.1\r\nHost: docker\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\nbody"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan string, 1)
			e := newFakeEngine(t, func(c net.Conn) {
				r := bufio.NewReader(c)
				readHeadRaw(r)
				io.WriteString(c, tc.answer)
				// An engine that keeps reading: what else arrives here?
				c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				rest, _ := io.ReadAll(r)
				got <- string(rest)
			})
			h := &recHook{}
			p := startProxy(t, e.addr(), h)
			c := dialRaw(t, p)
			io.WriteString(c, tc.req)
			if g := readFull(t, c, len(tc.answer)); g != tc.answer {
				t.Fatalf("the client got %q", g)
			}
			io.WriteString(c, create)
			within(t, 5*time.Second, "the connection to close", func() { io.ReadAll(c) })
			if rest := <-got; rest != "" {
				t.Errorf("after a close-delimited answer, the engine got %q", rest)
			}
			if admits, _, _ := h.seen(); len(admits) > 0 {
				t.Errorf("admits %q", admits)
			}
		})
	}
	t.Run("CONNECT with a length", func(t *testing.T) {
		const answer = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody"
		e := newFakeEngine(t, func(c net.Conn) {
			r := bufio.NewReader(c)
			readHeadRaw(r)
			io.WriteString(c, answer)
			readHeadRaw(r)
			io.ReadFull(r, make([]byte, 2))
			io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\n{\"Id\":\"c1\"}")
		})
		h := &recHook{labels: map[string]string{"run": "r"}}
		p := startProxy(t, e.addr(), h)
		c := dialRaw(t, p)
		io.WriteString(c, "CONNECT /debug/vars HTTP/1.1\r\nHost: docker\r\n\r\n")
		if g := readFull(t, c, len(answer)); g != answer {
			t.Fatalf("the client got %q", g)
		}
		io.WriteString(c, create)
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("the create after CONNECT: %v, %v", resp, err)
		}
		if admits, created, _ := h.seen(); !reflect.DeepEqual(admits, []string{"container late"}) || !reflect.DeepEqual(created, []string{"container late c1"}) {
			t.Errorf("admits %q created %q, want the create after CONNECT guarded", admits, created)
		}
	})
}

// captured is what an httpEngine got.
type captured struct {
	method, uri string
	header      http.Header
	body        []byte
	contentLen  int64
	te          []string
}

// captureEngine answers every request with status and body, and hands on
// what it got.
func captureEngine(t *testing.T, status int, body string) (*fakeEngine, chan captured) {
	ch := make(chan captured, 10)
	e := httpEngine(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- captured{r.Method, r.RequestURI, r.Header.Clone(), b, r.ContentLength, r.TransferEncoding}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
	return e, ch
}

// decodeNumbers decodes JSON with numbers as written.
func decodeNumbers(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return m
}

const containerBody = `{"Image":"img","Cmd":["sh","-c","echo <&>"],"Env":["A=1"],` +
	`"Labels":{"keep":"client","other":"x"},` +
	`"HostConfig":{"Memory":12345678901234567890,"NanoCpus":1.50e3,"CpuShares":0.10,"NetworkMode":"none"},` +
	`"NetworkingConfig":{"EndpointsConfig":{}},"StopTimeout":-1}`

func TestCreateContainer(t *testing.T) {
	const answer = `{"Id":"c0ffee","Warnings":[]}` + "\n"
	for _, tc := range []struct {
		name, query, asked, wantQuery, wantName string
	}{
		{"named", "platform=linux%2Famd64&name=given", "given", "platform=linux%2Famd64&name=given", "given"},
		{"unnamed", "platform=linux%2Famd64", "", "platform=linux%2Famd64&name=rz-1", "rz-1"},
		{"empty name", "name=&platform=linux%2Famd64", "", "platform=linux%2Famd64&name=rz-1", "rz-1"},
		{"no query", "", "", "name=rz-1", "rz-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, got := captureEngine(t, http.StatusCreated, answer)
			h := &recHook{labels: map[string]string{"keep": "hook", "run": "r1"}, names: map[string]string{KindContainer: "rz-1"}}
			p := startProxy(t, e.addr(), h)
			uri := "/v1.41/containers/create"
			if tc.query != "" {
				uri += "?" + tc.query
			}
			resp, err := unixClient(p.Addr()).Post("http://docker"+uri, "application/json", strings.NewReader(containerBody))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// The hook hears of the id before the client does.
			admits, created, failed := h.seen()
			if want := []string{"container " + tc.asked}; !reflect.DeepEqual(admits, want) {
				t.Errorf("admits %q, want %q", admits, want)
			}
			// The hook reads the client's own labels.
			h.mu.Lock()
			given := h.given
			h.mu.Unlock()
			if want := []map[string]string{{"keep": "client", "other": "x"}}; !reflect.DeepEqual(given, want) {
				t.Errorf("the hook was given the labels %v, want %v", given, want)
			}
			if want := []string{"container " + tc.wantName + " c0ffee"}; !reflect.DeepEqual(created, want) || len(failed) > 0 {
				t.Errorf("created %q failed %q, want created %q", created, failed, want)
			}
			if resp.StatusCode != http.StatusCreated || string(b) != answer {
				t.Errorf("the client got %d %q", resp.StatusCode, b)
			}

			g := <-got
			if want := "/v1.41/containers/create?" + tc.wantQuery; g.uri != want {
				t.Errorf("the engine got %s, want %s", g.uri, want)
			}
			if g.contentLen != int64(len(g.body)) || len(g.te) > 0 {
				t.Errorf("the engine got Content-Length %d, Transfer-Encoding %q, for %d bytes", g.contentLen, g.te, len(g.body))
			}
			// Numbers are as written; the labels merged, the hook's
			// winning; nothing else changed.
			for _, s := range []string{`12345678901234567890`, `1.50e3`, `0.10`, `"echo <&>"`} {
				if !bytes.Contains(g.body, []byte(s)) {
					t.Errorf("the engine's body lost %s: %s", s, g.body)
				}
			}
			gotDoc, wantDoc := decodeNumbers(t, g.body), decodeNumbers(t, []byte(containerBody))
			wantDoc["Labels"] = map[string]any{"keep": "hook", "other": "x", "run": "r1"}
			if !reflect.DeepEqual(gotDoc, wantDoc) {
				t.Errorf("the engine got\n%v\nwant\n%v", gotDoc, wantDoc)
			}
			if g.header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q", g.header.Get("Content-Type"))
			}
		})
	}
}

// TestCreateUnchanged: a create the hook changes nothing of goes as it
// came.
func TestCreateUnchanged(t *testing.T) {
	req := "POST /containers/create?name=x HTTP/1.1\r\nHost: docker\r\nContent-Length: " +
		fmt.Sprint(len(containerBody)) + "\r\n\r\n" + containerBody
	got := make(chan string, 1)
	e := newFakeEngine(t, func(c net.Conn) {
		b := make([]byte, len(req))
		io.ReadFull(c, b)
		got <- string(b)
		io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\n{\"Id\":\"ab\"}")
	})
	h := &recHook{}
	p := startProxy(t, e.addr(), h)
	c := dialRaw(t, p)
	io.WriteString(c, req)
	if g := <-got; g != req {
		t.Errorf("the engine got %q, want %q", g, req)
	}
	readFull(t, c, len("HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\n{\"Id\":\"ab\"}"))
	if _, created, _ := h.seen(); !reflect.DeepEqual(created, []string{"container x ab"}) {
		t.Errorf("created %q", created)
	}
}

// TestCreatedAnswerFramings: the id is read from a 201 however it is
// framed, and the answer reaches the client as it came; one too large to
// hold streams on (the hook then hears of no id).
func TestCreatedAnswerFramings(t *testing.T) {
	big := `{"Id":"big","Warnings":["` + strings.Repeat("w", maxHeldAnswer) + `"]}`
	for _, tc := range []struct{ name, answer, wantID string }{
		{"chunked", "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"Id\"\r\n7\r\n:\"ch1\"}\r\n0\r\n\r\n", "ch1"},
		{"too large", fmt.Sprintf("HTTP/1.1 201 Created\r\nContent-Length: %d\r\n\r\n%s", len(big), big), ""},
		{"close-delimited", "HTTP/1.1 201 Created\r\n\r\n{\"Id\":\"cd\"}", ""},
		{"no id", "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const req = "POST /containers/create?name=x HTTP/1.1\r\nHost: docker\r\nContent-Length: 2\r\n\r\n{}"
			e := newFakeEngine(t, func(c net.Conn) {
				io.ReadFull(c, make([]byte, len(req)))
				io.WriteString(c, tc.answer)
			})
			h := &recHook{}
			p := startProxy(t, e.addr(), h)
			c := dialRaw(t, p)
			io.WriteString(c, req)
			if got := readFull(t, c, len(tc.answer)); got != tc.answer {
				t.Errorf("the client got %.200q", got)
			}
			if !proctest.Poll(5*time.Second, func() bool { _, created, _ := h.seen(); return len(created) == 1 }) {
				t.Fatal("Created was not called")
			}
			if _, created, _ := h.seen(); created[0] != "container x "+tc.wantID {
				t.Errorf("created %q, want id %q", created, tc.wantID)
			}
		})
	}
}

func TestCreateNetwork(t *testing.T) {
	const answer = `{"Id":"n1","Warning":""}`
	for _, tc := range []struct {
		name, body, wantName string
		chunked              bool
	}{
		{"named", `{"Name":"given","Driver":"bridge","CheckDuplicate":true,"Labels":null,"Options":{"a":"b"}}`, "given", false},
		{"unnamed, chunked", `{"Driver":"bridge","CheckDuplicate":true,"Options":{"a":"b"}}`, "rz-net", true},
		{"lower-case keys", `{"name":"","driver":"bridge","labels":{"x":"y"},"Options":{"a":"b"}}`, "rz-net", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, got := captureEngine(t, http.StatusCreated, answer)
			h := &recHook{labels: map[string]string{"run": "r1"}, names: map[string]string{KindNetwork: "rz-net"}}
			p := startProxy(t, e.addr(), h)
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(strings.NewReader(tc.body)) // unknown length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, "http://docker/v1.41/networks/create", body)
			req.Header.Set("Content-Type", "application/json")
			resp, err := unixClient(p.Addr()).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated || string(b) != answer {
				t.Errorf("the client got %d %q", resp.StatusCode, b)
			}
			if _, created, _ := h.seen(); !reflect.DeepEqual(created, []string{"network " + tc.wantName + " n1"}) {
				t.Errorf("created %q", created)
			}
			g := <-got
			if g.uri != "/v1.41/networks/create" || g.contentLen != int64(len(g.body)) {
				t.Errorf("the engine got %s, Content-Length %d for %d bytes", g.uri, g.contentLen, len(g.body))
			}
			doc := decodeNumbers(t, g.body)
			if doc["Name"] != tc.wantName {
				t.Errorf("Name %v, want %s: %s", doc["Name"], tc.wantName, g.body)
			}
			labels, _ := doc["Labels"].(map[string]any)
			if labels["run"] != "r1" {
				t.Errorf("Labels %v: %s", doc["Labels"], g.body)
			}
			if tc.name == "lower-case keys" {
				if _, ok := doc["name"]; ok || labels["x"] != "y" || doc["labels"] != nil {
					t.Errorf("the spellings were not merged: %s", g.body)
				}
			}
			if opts, _ := doc["Options"].(map[string]any); opts["a"] != "b" {
				t.Errorf("Options lost: %s", g.body)
			}
		})
	}
}

func TestCreateFailed(t *testing.T) {
	const answer = `{"message":"Conflict. The container name \"/x\" is already in use"}` + "\n"
	e, _ := captureEngine(t, http.StatusConflict, answer)
	h := &recHook{}
	p := startProxy(t, e.addr(), h)
	resp, err := unixClient(p.Addr()).Post("http://docker/v1.41/containers/create?name=x", "application/json", strings.NewReader(`{"Image":"i"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || string(b) != answer {
		t.Errorf("the client got %d %q", resp.StatusCode, b)
	}
	if _, created, failed := h.seen(); len(created) > 0 || !reflect.DeepEqual(failed, []string{"container x"}) {
		t.Errorf("created %q failed %q", created, failed)
	}
}

func TestCreateRefused(t *testing.T) {
	e, got := captureEngine(t, http.StatusOK, "OK")
	h := &recHook{refuse: []string{"bad"}}
	p := startProxy(t, e.addr(), h)
	cl := unixClient(p.Addr())
	for _, path := range []string{"/v1.41/containers/create?name=bad", "/networks/create"} {
		body := `{"Image":"i"}`
		if strings.Contains(path, "networks") {
			body = `{"Name":"bad"}`
		}
		resp, err := cl.Post("http://docker"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var msg struct{ Message string }
		json.Unmarshal(b, &msg)
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(msg.Message, `refused by the test`) {
			t.Errorf("%s: the client got %d %q", path, resp.StatusCode, b)
		}
	}
	// The connection is still good, and the engine heard of nothing else.
	resp, err := cl.Get("http://docker/_ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if g := <-got; g.uri != "/_ping" {
		t.Errorf("the engine got %s %s", g.method, g.uri)
	}
	if len(got) > 0 {
		t.Errorf("the engine got more: %v", <-got)
	}
	if _, created, failed := h.seen(); len(created)+len(failed) > 0 {
		t.Errorf("created %q failed %q after a refusal", created, failed)
	}
}

func TestCreateRefusedUnguardable(t *testing.T) {
	e, got := captureEngine(t, http.StatusCreated, `{"Id":"x"}`)
	h := &recHook{}
	p := startProxy(t, e.addr(), h)
	for _, tc := range []struct{ path, body string }{
		{"/containers/create", ``},
		{"/containers/create", `not json`},
		{"/containers/create", `null`},
		{"/containers/create", `[]`},
		{"/containers/create", `{"Image":"i"} {}`},
		{"/containers/create", `{"Labels":"a=b"}`},
		{"/networks/create", `{"Name":"a","name":"b"}`},
		{"/networks/create", `{"Name":7}`},
	} {
		resp, err := unixClient(p.Addr()).Post("http://docker"+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "cannot guard") {
			t.Errorf("%s %q: got %d %s", tc.path, tc.body, resp.StatusCode, b)
		}
	}
	if admits, _, _ := h.seen(); len(admits) > 0 || len(got) > 0 {
		t.Errorf("an unguardable create was admitted (%q) or forwarded (%d)", admits, len(got))
	}
}

func TestCreateTooLarge(t *testing.T) {
	e, got := captureEngine(t, http.StatusCreated, `{"Id":"x"}`)
	h := &recHook{}
	p := startProxy(t, e.addr(), h)
	big := `{"Image":"i","Env":["X=` + strings.Repeat("a", MaxCreateBody) + `"]}`
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(big)
		if chunked {
			body = io.MultiReader(body)
		}
		resp, err := unixClient(p.Addr()).Post("http://docker/containers/create", "application/json", body)
		if err != nil {
			t.Fatalf("chunked %v: %v", chunked, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked %v: got %d %s", chunked, resp.StatusCode, b)
		}
	}
	if admits, _, _ := h.seen(); len(admits) > 0 || len(got) > 0 {
		t.Errorf("a create too large was admitted (%q) or forwarded (%d)", admits, len(got))
	}
}

func TestCreateExpectContinue(t *testing.T) {
	e, got := captureEngine(t, http.StatusCreated, `{"Id":"x1"}`)
	h := &recHook{labels: map[string]string{"run": "r"}}
	p := startProxy(t, e.addr(), h)
	cl := unixClient(p.Addr())
	cl.Transport.(*http.Transport).ExpectContinueTimeout = time.Minute
	for _, path := range []string{"/containers/create?name=a", "/v1.41/images/load"} {
		req, _ := http.NewRequest(http.MethodPost, "http://docker"+path, strings.NewReader(`{"Image":"i"}`))
		req.Header.Set("Expect", "100-continue")
		within(t, 10*time.Second, "a request expecting 100 Continue", func() {
			resp, err := cl.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
		g := <-got
		if strings.Contains(path, "create") && !bytes.Contains(g.body, []byte(`"run":"r"`)) {
			t.Errorf("%s: the engine got %s", path, g.body)
		}
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := "tcp://" + ln.Addr().String()
	ln.Close()
	for _, up := range []string{"unix://" + socketDir(t) + "/nothing.sock", closedPort} {
		p := startProxy(t, up, &recHook{})
		start := time.Now()
		cli, err := client.New(client.WithHost(p.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cli.Ping(context.Background(), client.PingOptions{})
		cli.Close()
		if err == nil || !strings.Contains(err.Error(), up) {
			t.Errorf("%s: Ping through the proxy: %v, want an error naming the upstream", up, err)
		}
		resp, err := unixClient(p.Addr()).Get("http://docker/_ping")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), up) {
			t.Errorf("%s: got %d %s", up, resp.StatusCode, b)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %s", up, d)
		}
	}
}

// TestClientHangupReachesEngine: a client that goes away while an answer
// streams is seen by the engine at once, as if it were connected directly.
func TestClientHangupReachesEngine(t *testing.T) {
	gone := make(chan struct{})
	e := httpEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	})
	p := startProxy(t, e.addr(), &recHook{})
	resp, err := unixClient(p.Addr()).Get("http://docker/v1.41/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not see the client go")
	}
	if !proctest.Poll(5*time.Second, func() bool { return p.liveConns() == 0 }) {
		t.Errorf("%d connections still open", p.liveConns())
	}
}

// TestUpstreamClosedIdleConnection: the engine closes an idle connection; the
// next request (a POST, which a client would not retry) goes through a new
// one.
func TestUpstreamClosedIdleConnection(t *testing.T) {
	e := serverEngine(t, &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, "OK")
		}),
		IdleTimeout: 100 * time.Millisecond,
	})
	p := startProxy(t, e.addr(), &recHook{})
	cl := unixClient(p.Addr())
	for i := range 2 {
		resp, err := cl.Post("http://docker/v1.41/containers/x/start", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if i == 0 {
			// The next request must find the proxy's connection to the
			// engine closed by the engine.
			deadline := time.Now().Add(10 * time.Second)
			for e.closed.Load() < 1 {
				if time.Now().After(deadline) {
					t.Fatal("the engine did not close its idle connection within 10 s")
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	if n := e.accepted.Load(); n != 2 {
		t.Errorf("the engine was connected to %d times, want 2", n)
	}
}

func TestHeadTooLarge(t *testing.T) {
	e, _ := captureEngine(t, http.StatusOK, "OK")
	p := startProxy(t, e.addr(), &recHook{})
	c := dialRaw(t, p)
	go func() {
		io.WriteString(c, "GET /_ping HTTP/1.1\r\nHost: docker\r\nX-Big: "+strings.Repeat("a", 2*maxHeadBytes)+"\r\n\r\n")
	}()
	h, err := readHeadRaw(bufio.NewReader(c))
	if err != nil || !strings.HasPrefix(h, "HTTP/1.1 431 ") {
		t.Errorf("got %q, %v", h, err)
	}
}

func TestCloseEndsConnections(t *testing.T) {
	e := newFakeEngine(t, func(c net.Conn) {
		io.ReadFull(c, make([]byte, len(upgradeReq)))
		io.WriteString(c, upgradeResp)
		io.Copy(io.Discard, c)
	})
	p, err := Start(socketDir(t)+"/docker.sock", e.addr(), &recHook{})
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(p.Addr(), "unix://")
	if fi, err := os.Stat(path); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %s: %v, %v", path, fi.Mode(), err)
	}
	c := dialRaw(t, p)
	io.WriteString(c, upgradeReq)
	r := bufio.NewReader(c)
	if _, err := readHeadRaw(r); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "Close", func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	within(t, 5*time.Second, "the connection's end", func() { io.Copy(io.Discard, r) })
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the socket is still there: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := net.Dial("unix", path); err == nil {
		t.Error("a closed proxy accepts connections")
	}
}

func TestStartRefuses(t *testing.T) {
	dir := socketDir(t)
	for _, tc := range []struct{ path, upstream string }{
		{dir + "/a.sock", "ssh://host"},
		{dir + "/a.sock", "npipe:////./pipe/docker_engine"},
		{dir + "/a.sock", "/var/run/docker.sock"},
		{dir + "/a.sock", "tcp://host:2375/base"},
		{dir + "/a.sock", "unix://" + dir + "/a.sock"},
		{dir + "/missing/a.sock", "unix:///var/run/docker.sock"},
	} {
		if p, err := Start(tc.path, tc.upstream, &recHook{}); err == nil {
			p.Close()
			t.Errorf("Start(%s, %s) succeeded", tc.path, tc.upstream)
		}
	}
	if _, err := Start(dir+"/b.sock", "unix:///var/run/docker.sock", nil); err == nil {
		t.Error("Start without a hook succeeded")
	}
	// Something at the path is not replaced.
	os.WriteFile(dir+"/c.sock", nil, 0o600)
	if p, err := Start(dir+"/c.sock", "unix:///var/run/docker.sock", &recHook{}); err == nil {
		p.Close()
		t.Error("Start over an existing file succeeded")
	}
}

func TestParseUpstream(t *testing.T) {
	for in, want := range map[string]endpoint{
		"unix:///var/run/docker.sock": {"unix", "/var/run/docker.sock", "unix:///var/run/docker.sock"},
		"tcp://127.0.0.1:2376":        {"tcp", "127.0.0.1:2376", "tcp://127.0.0.1:2376"},
		"tcp://docker":                {"tcp", "docker:2375", "tcp://docker"},
		"tcp://[::1]:1234/":           {"tcp", "[::1]:1234", "tcp://[::1]:1234/"},
		"http://h:1":                  {"tcp", "h:1", "http://h:1"},
	} {
		got, err := parseUpstream(in)
		if err != nil || got != want {
			t.Errorf("parseUpstream(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
}

// TestRouteOf: which requests the proxy guards, watches or refuses, with
// the paths matched as Docker's and Podman's routers match them.
func TestRouteOf(t *testing.T) {
	create := func(kind string, inBody bool, created int) route {
		return route{op: opCreate, kinds: []string{kind}, nameInBody: inBody, created: created}
	}
	remove := func(ref string, kinds ...string) route { return route{op: opRemove, kinds: kinds, ref: ref} }
	for _, tc := range []struct {
		req  string
		want route
	}{
		{"POST /containers/create", create(KindContainer, false, 201)},
		{"POST /v1.41/containers/create", create(KindContainer, false, 201)},
		{"POST /v1.52/networks/create", create(KindNetwork, true, 201)},
		{"POST /networks/create", create(KindNetwork, true, 201)},
		{"POST /containers%2Fcreate", create(KindContainer, false, 201)}, // Docker's router decodes
		{"POST /v1.41/networks/create?x=/y", create(KindNetwork, true, 201)},
		// Podman's router takes letters and dashes in the version.
		{"POST /v4.0.0-dev/containers/create", create(KindContainer, false, 201)},
		{"POST /v1.41-rz/networks/create", create(KindNetwork, true, 201)},
		{"POST /v4.0.0/libpod/containers/create", create(KindContainer, true, 201)},
		{"POST /v4.3.1/libpod/networks/create", create(KindNetwork, true, 200)},
		{"POST /v1.41/containers/create/", route{}},
		{"POST /v1.41/containers/x/create", route{}},
		{"POST /vx/containers/create", route{}},
		{"POST /v/containers/create", route{}},
		{"POST /v1.41/volumes/create", create(KindVolume, true, 201)},
		{"POST /v4.0.0/libpod/volumes/create", route{}}, // its labels are spelt otherwise: not guarded
		{"POST /v1.41/build?t=a", route{op: opBuild, kinds: []string{KindImage}}},
		{"POST /v4.0.0/libpod/build", route{}},
		{"POST /v1.41/containers/createx", route{}},
		{"POST /v1.41//containers/create", route{}},
		{"POST /libpod/containers/create", route{}}, // Podman's own API is versioned only
		{"GET /v1.41/containers/create", route{}},
		{"post /v1.41/containers/create", route{}}, // the routers match methods exactly
		{"CONNECT /debug/vars", route{}},

		{"POST /v1.41/containers/abc/attach", route{op: opHijack}},
		{"POST /exec/abc/start", route{op: opHijack}},
		{"POST /v4.0.0/libpod/containers/abc/attach", route{op: opHijack}},
		{"POST /v4.0.0/libpod/exec/abc/start", route{op: opHijack}},
		{"CONNECT /v1.41/containers/abc/attach", route{}},
		{"GET /v1.41/containers/abc/attach/ws", route{}}, // a 101 makes it a pipe

		{"DELETE /v1.41/containers/abc?force=1", remove("abc", KindContainer)},
		{"DELETE /containers/a%2Eb", remove("a.b", KindContainer)},
		{"DELETE /v4.0.0/libpod/containers/abc", remove("abc", KindContainer)},
		{"DELETE /v1.41/networks/n1", remove("n1", KindNetwork)},
		{"DELETE /v4.0.0/libpod/networks/n1", remove("n1", KindNetwork)},
		{"POST /v1.41/containers/abc/wait?condition=removed", remove("abc", KindContainer)},
		{"POST /v1.41/containers/prune", remove("", KindContainer)},
		{"POST /v1.41/networks/prune", remove("", KindNetwork)},
		{"POST /v4.0.0/libpod/system/prune", remove("", KindContainer, KindNetwork)},
		{"DELETE /v4.0.0/libpod/pods/p1", remove("", KindContainer, KindNetwork)},
		{"DELETE /v4.0.0/libpod/play/kube", remove("", KindContainer, KindNetwork)},
		{"DELETE /v1.41/containers/a/b", route{}},
		{"DELETE /v1.41/images/abc", remove("", KindImage)},
		{"DELETE /v1.41/images/reg/repo:tag", remove("", KindImage)},
		{"DELETE /v1.41/volumes/v1", remove("v1", KindVolume)},
		{"POST /v1.41/volumes/prune", remove("", KindVolume)},
		{"POST /v1.41/images/prune", remove("", KindImage)},

		{"POST /v4.0.0/libpod/pods/create", route{op: opRefuse, why: refusePod}},
		{"POST /v4.0.0/libpod/play/kube", route{op: opRefuse, why: refuseKube}},
		{"POST /v4.0.0/libpod/kube/play", route{op: opRefuse, why: refuseKube}},
		{"POST /v4.0.0/libpod/containers/abc/restore?import=1", route{op: opRefuse, why: refuseRestore}},
		{"POST /v1.41/pods/create", route{}},
	} {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(tc.req + " HTTP/1.1\r\nHost: d\r\n\r\n")))
		if err != nil {
			t.Fatal(err)
		}
		if got := routeOf(req); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("routeOf(%s) = %+v, want %+v", tc.req, got, tc.want)
		}
	}
}

func TestSetQueryParam(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"", "name=n+1%2F"},
		{"name=old", "name=n+1%2F"},
		{"a=%2F&name=old&b&name=x&%6Eame=y", "a=%2F&b&name=n+1%2F"},
		{"platform=linux%2Famd64", "platform=linux%2Famd64&name=n+1%2F"},
	} {
		if got := setQueryParam(tc.raw, "name", "n 1/"); got != tc.want {
			t.Errorf("setQueryParam(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

func TestRewriteHead(t *testing.T) {
	head := "POST /v1.41/containers/create?a=1 HTTP/1.1\r\nHost: docker\r\ncontent-length: 5\r\nTransfer-Encoding: chunked\r\nX-Folded: a\r\n b\r\nExpect: 100-continue\r\n\r\n"
	got := string(rewriteHead([]byte(head), "/v1.41/containers/create?a=1&name=x", 42, true))
	want := "POST /v1.41/containers/create?a=1&name=x HTTP/1.1\r\nHost: docker\r\nX-Folded: a\r\n b\r\nContent-Length: 42\r\n\r\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// TestManyClients runs clients at once through one proxy (for the race
// detector).
func TestManyClients(t *testing.T) {
	e := httpEngine(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/containers/create" {
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"Id":"id-%s"}`, r.URL.Query().Get("name"))
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	h := &recHook{labels: map[string]string{"a": "b"}}
	p := startProxy(t, e.addr(), h)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			cl := unixClient(p.Addr())
			for j := range 20 {
				name := fmt.Sprintf("c%d-%d", i, j)
				resp, err := cl.Post("http://docker/containers/create?name="+name, "application/json", strings.NewReader(`{}`))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != `{"Id":"id-`+name+`"}` {
					t.Errorf("got %s", b)
				}
				resp, err = cl.Post("http://docker/echo", "text/plain", strings.NewReader(name))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != name {
					t.Errorf("echo %s: got %s", name, b)
				}
			}
		})
	}
	wg.Wait()
	if _, created, _ := h.seen(); len(created) != 160 {
		t.Errorf("%d created, want 160", len(created))
	}
}
