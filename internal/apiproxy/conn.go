package apiproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// A client's connection is paired with one connection to the engine, dialed
// at its first request: keep-alive, pipelining and connection upgrades then
// mean on the engine's side what they meant on the client's. Requests are
// forwarded one at a time, each answer before the next request.
//
// Goroutines: serve owns the connection and reads the engine's answers;
// while an answer is forwarded, a watcher owns the client's reader (it
// copies a request body that was not at hand, then waits for the client's
// next bytes, so that a client that hangs up is seen at once and the
// engine told, as it would have been directly); between requests, another
// watches the engine's side, so that a connection the engine closed is
// replaced instead of failing the next request.

// Where a connection is, for its watcher.
const (
	phaseIdle   = iota // between requests
	phaseAnswer        // an answer is being forwarded
	phaseRaw           // upgraded: bytes flow both ways
)

// How long and how much linger reads, at most.
const (
	lingerTime  = 5 * time.Second
	lingerBytes = 64 << 20
)

// aLongTimeAgo, as a read deadline, wakes up a blocked read at once.
var aLongTimeAgo = time.Unix(1, 0)

type conn struct {
	p      *Proxy
	client net.Conn
	cr     *bufio.Reader
	cw     *bufio.Writer

	up     net.Conn // nil until the first request
	ur     *bufio.Reader
	uw     *bufio.Writer
	upIdle chan error // the idle engine connection's watcher, or nil

	phase    atomic.Int32
	method   string // the current request's
	parser   headParser
	reqHead  []byte
	respHead []byte
}

func newConn(p *Proxy, c net.Conn) *conn {
	cc := &conn{p: p, client: c}
	cc.cr, cc.cw = newBuffers(c)
	return cc
}

// serve forwards the client's requests until one side hangs up.
func (c *conn) serve() {
	defer c.closeAll()
	var next <-chan error
	for {
		if next != nil {
			if err := <-next; err != nil {
				return
			}
		}
		c.phase.Store(phaseIdle)
		head, err := readHead(c.cr, c.reqHead, maxHeadBytes)
		c.reqHead = head[:0]
		switch {
		case errors.Is(err, errHeadTooLarge):
			c.reply(http.StatusRequestHeaderFieldsTooLarge, "apiproxy: request head larger than "+strconv.Itoa(maxHeadBytes)+" bytes", true)
			return
		case err != nil:
			return
		}
		c.method = ""
		req, err := c.parser.request(head)
		if err == nil {
			c.method = req.Method
		}
		if err != nil {
			c.reply(http.StatusBadRequest, "apiproxy: malformed request: "+err.Error(), true)
			return
		}
		if req.ProtoMajor != 1 {
			c.reply(http.StatusHTTPVersionNotSupported, "apiproxy: only HTTP/1.x is supported", true)
			return
		}
		var ok bool
		switch rt := routeOf(req); rt.op {
		case opCreate:
			next, ok = c.create(req, head, rt)
		case opBuild:
			next, ok = c.build(req, head, rt)
		case opRefuse:
			c.reply(http.StatusForbidden, "rightsize: "+rt.why, true)
		default:
			next, ok = c.forward(req, head, rt)
		}
		if !ok {
			return
		}
	}
}

// forward sends a request as it is, then its answer back.
func (c *conn) forward(req *http.Request, head []byte, rt route) (<-chan error, bool) {
	if err := c.connectUpstream(); err != nil {
		c.reply(http.StatusBadGateway, err.Error(), true)
		return nil, false
	}
	if _, err := c.uw.Write(head); err != nil {
		return nil, false
	}
	// A body at hand is sent now, with the head; one still to come is
	// copied by the watcher, while the answer is read (the engine may
	// answer early, or want "100 Continue" first).
	var body func() error
	switch f := requestFraming(req); {
	case f.chunked:
		body = func() error { return copyBody(c.uw, c.cr, f) }
	case f.length > int64(c.cr.Buffered()):
		body = func() error { return copyBody(c.uw, c.cr, f) }
	default:
		if err := copyBody(c.uw, c.cr, f); err != nil {
			return nil, false
		}
	}
	return c.answer(req, rt, c.watch(body), nil)
}

// pending is a create the engine has been sent.
type pending struct {
	kind, name string
	created    int // the status of its success
}

// answer forwards the engine's answer to req; for a create, it tells the
// hook how it went before the client learns it, and for a removal, that
// it may have happened. It returns what serve waits for before the next
// request, and false when the connection is done with.
func (c *conn) answer(req *http.Request, rt route, next <-chan error, pc *pending) (<-chan error, bool) {
	failed := func(status int) {
		if pc != nil {
			c.p.hook.Failed(pc.kind, pc.name, status)
		}
	}
	var head []byte
	var resp *http.Response
	for {
		h, err := readHead(c.ur, c.respHead, maxHeadBytes)
		c.respHead = h[:0]
		if err == nil {
			resp, err = c.parser.response(h, req.Method)
		}
		if err != nil {
			// The engine hung up, or spoke nonsense: the client's
			// connection goes the same way.
			failed(0)
			c.abort()
			return nil, false
		}
		if resp.StatusCode/100 == 1 && resp.StatusCode != http.StatusSwitchingProtocols {
			// 100 Continue and the like: forwarded, and the answer follows.
			c.cw.Write(h)
			if err := c.cw.Flush(); err != nil {
				failed(0)
				c.abort()
				return nil, false
			}
			continue
		}
		head = h
		break
	}

	f := responseFraming(req.Method, resp)
	ok := resp.StatusCode/100 == 2
	removed := func([]byte) {
		for _, k := range rt.kinds {
			c.p.hook.Removed(k, rt.ref)
		}
	}
	// Only the engine's own take-overs make a pipe: a 101, or the raw
	// stream an attach or exec start answers older clients with. Any
	// other answer leaves the engine reading requests on the connection,
	// each of which must be seen (a CONNECT to a route that takes any
	// method is answered 200, and is no take-over).
	if resp.StatusCode == http.StatusSwitchingProtocols || rt.op == opHijack && ok && f.closeDelimited {
		if pc != nil {
			failed(resp.StatusCode)
		}
		c.cw.Write(head)
		c.raw(next)
		return nil, false
	}
	if f.closeDelimited {
		// A body that ends with the connection: forwarded to its end, and
		// the connection ends with it. Nothing more of the client's
		// reaches the engine.
		if pc != nil {
			if resp.StatusCode == pc.created {
				c.p.hook.Created(pc.kind, pc.name, "")
			} else {
				failed(resp.StatusCode)
			}
		}
		c.cw.Write(head)
		if err := c.cw.Flush(); err == nil {
			c.ur.WriteTo(c.client)
		}
		if rt.op == opRemove {
			removed(nil)
		}
		c.abort()
		return nil, false
	}

	switch {
	case pc != nil && resp.StatusCode == pc.created:
		if !c.hold(head, f, func(body []byte) { c.p.hook.Created(pc.kind, pc.name, answerID(body, f)) }) {
			return nil, false
		}
	case rt.op == opRemove:
		// Whatever the engine answered: a 404 may mean something else
		// removed it first (Podman's cleanup of a --rm container races
		// the client's own DELETE); the hook forgets only what the
		// engine no longer has.
		// The hook hears of it before the client has the answer, or, for
		// an answer with a body, its body: a wait's head comes at once,
		// and its client waits for it before it starts the container;
		// its body comes once the container is gone.
		if f.chunked || f.length > 0 {
			c.cw.Write(head)
			if err := c.cw.Flush(); err != nil {
				c.abort()
				return nil, false
			}
			head = nil
		}
		if !c.hold(head, f, removed) {
			return nil, false
		}
	default:
		failed(resp.StatusCode)
		c.cw.Write(head)
		if err := copyBody(c.cw, c.ur, f); err != nil {
			c.abort()
			return nil, false
		}
	}
	c.phase.Store(phaseIdle)
	if req.Close || resp.Close {
		return nil, false
	}
	c.watchUpstream()
	return next, true
}

// hold reads an answer (its head, when not nil, and its body) whole, up to
// maxHeldAnswer bytes (past that it streams on), calls then with its body
// (nil when it streamed on, or the engine broke off), then forwards it as
// it came.
func (c *conn) hold(head []byte, f framing, then func(body []byte)) bool {
	hw := &holdWriter{limit: maxHeldAnswer, spill: c.cw}
	hw.Write(head)
	err := copyBody(hw, c.ur, f)
	var body []byte
	if err == nil && !hw.spilled {
		body = hw.buf[len(head):]
	}
	then(body)
	if err != nil {
		c.abort()
		return false
	}
	if !hw.spilled {
		c.cw.Write(hw.buf)
		if err := c.cw.Flush(); err != nil {
			c.abort()
			return false
		}
	}
	return true
}

// answerID is the "Id" of a create's answer body, "" when there is none.
func answerID(body []byte, f framing) string {
	if body == nil {
		return ""
	}
	if f.chunked {
		var err error
		if body, err = readChunked(bufio.NewReader(bytes.NewReader(body)), maxHeldAnswer); err != nil {
			return ""
		}
	}
	var a struct {
		ID string `json:"Id"`
	}
	if json.Unmarshal(body, &a) != nil {
		return ""
	}
	return a.ID
}

// watch starts the watcher of the client's side for the time of an
// answer: it copies the rest of the request's body (body, when not nil),
// then waits for the client's next bytes. What it returns gives nil once
// the client has sent more, or the error that ended the client's side.
// While an answer is forwarded, a client that hangs up is passed on: its
// end-of-file half-closes the engine's side, an error closes it.
func (c *conn) watch(body func() error) <-chan error {
	c.phase.Store(phaseAnswer)
	ch := make(chan error, 1)
	c.p.wg.Add(1)
	go func() {
		defer c.p.wg.Done()
		if body != nil {
			if err := body(); err != nil {
				// The engine may have answered and closed before reading
				// it all: that answer is still forwarded, then the
				// connection closed. A client that failed is passed on.
				if !errors.As(err, new(dstError)) {
					c.abort()
				}
				ch <- err
				return
			}
		}
		_, err := c.cr.Peek(1)
		if err != nil && c.phase.Load() == phaseAnswer {
			if errors.Is(err, io.EOF) {
				closeWrite(c.up)
			} else {
				c.abort()
			}
		}
		ch <- err
	}()
	return ch
}

// raw copies bytes both ways until both sides hung up, passing each
// half-close on. next is the client watcher's: the client's side is copied
// once it has something to say.
func (c *conn) raw(next <-chan error) {
	c.phase.Store(phaseRaw)
	done := make(chan struct{})
	c.p.wg.Add(1)
	go func() {
		defer c.p.wg.Done()
		defer close(done)
		err := <-next
		if err == nil {
			if err = c.uw.Flush(); err == nil {
				_, err = c.cr.WriteTo(c.up)
			}
		}
		if err == nil || errors.Is(err, io.EOF) {
			closeWrite(c.up)
		} else {
			c.abort()
		}
	}()
	err := c.cw.Flush()
	if err == nil {
		_, err = c.ur.WriteTo(c.client)
	}
	if err == nil {
		closeWrite(c.client)
	} else {
		c.abort()
	}
	<-done
}

// connectUpstream makes sure the engine's connection is there: dialed at
// the first request, and again when the engine closed it between requests.
func (c *conn) connectUpstream() error {
	if c.up != nil && c.reclaimUpstream() {
		return nil
	}
	if c.up != nil {
		c.p.untrack(c.up)
		c.up = nil
	}
	up, err := c.p.dial()
	if err != nil {
		return err
	}
	c.up = up
	c.ur, c.uw = newBuffers(up)
	return nil
}

// watchUpstream watches the idle engine connection: a read that returns is
// the engine hanging up (or saying something unasked, which leaves the
// connection out of step just as much).
func (c *conn) watchUpstream() {
	ch := make(chan error, 1)
	c.upIdle = ch
	c.p.wg.Add(1)
	go func() {
		defer c.p.wg.Done()
		_, err := c.ur.Peek(1)
		ch <- err
	}()
}

// reclaimUpstream stops the idle watcher and reports whether the engine's
// connection is still good.
func (c *conn) reclaimUpstream() bool {
	if c.upIdle == nil {
		return true
	}
	c.up.SetReadDeadline(aLongTimeAgo)
	err := <-c.upIdle
	c.upIdle = nil
	c.up.SetReadDeadline(time.Time{})
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// abort closes both sides at once.
func (c *conn) abort() {
	c.client.Close()
	if c.up != nil {
		c.up.Close()
	}
}

func (c *conn) closeAll() {
	c.p.untrack(c.client)
	if c.up != nil {
		c.p.untrack(c.up)
	}
}

// reply answers the client itself, the way the engine words its errors:
// {"message": "..."}, which Docker clients show as
// "Error response from daemon: ...".
func (c *conn) reply(status int, msg string, closing bool) bool {
	body, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{msg})
	body = append(body, '\n')
	if c.method == http.MethodHead {
		body = nil // the length is told, the body is not sent
	}
	fmt.Fprintf(c.cw, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", status, http.StatusText(status), len(body))
	if closing {
		c.cw.WriteString("Connection: close\r\n")
	}
	c.cw.WriteString("\r\n")
	c.cw.Write(body)
	if err := c.cw.Flush(); err != nil {
		return false
	}
	if closing {
		c.linger()
	}
	return true
}

// linger reads and drops what the client still sends (the rest of a body
// that was refused, say), for a while, before the connection is closed: a
// client still writing its request when the connection closes may see
// its write fail instead of the answer it was given.
func (c *conn) linger() {
	closeWrite(c.client)
	c.client.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, c.cr, lingerBytes)
}
