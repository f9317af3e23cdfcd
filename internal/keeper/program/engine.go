package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	// callTimeout bounds each call to the engine, dial to last byte: an
	// engine that takes the connection and never answers must not hold the
	// keeper for ever.
	callTimeout = 30 * time.Second
	// maxBody is the largest answer read; a run's lists are far smaller.
	maxBody = 8 << 20
)

// engine is the engine's API over its unix socket, one HTTP/1.1 request
// per connection: what the keeper asks is a handful of calls, and a fresh
// connection each time is never a stale one.
type engine struct {
	socket  string
	timeout time.Duration
}

// statusError is an answer other than 2xx.
type statusError struct {
	method, path string
	code         int
	msg          string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.path, e.code, e.msg)
}

// codeOf is the HTTP status of err, or 0 when err is not an answer.
func codeOf(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.code
	}
	return 0
}

// call sends one request and decodes a 2xx answer's JSON into out (nil:
// the body is dropped). Any other answer is a *statusError carrying the
// engine's message.
func (e *engine) call(method, path string, out any) error {
	_, err := e.callHeaders(method, path, out)
	return err
}

// callHeaders is call, and returns the answer's headers (keys in lower
// case).
func (e *engine) callHeaders(method, path string, out any) (map[string]string, error) {
	code, hdr, body, err := e.do(method, path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return hdr, decode(method, path, code, body, out)
}

// decode makes an answer an error unless it is a 2xx, and decodes the
// JSON of a 2xx into out (nil: the body is dropped).
func decode(method, path string, code int, body []byte, out any) error {
	if code < 200 || code > 299 {
		var m struct {
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &m) == nil && m.Message != "" {
			msg = m.Message
		}
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return &statusError{method: method, path: path, code: code, msg: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

func (e *engine) do(method, path string) (int, map[string]string, []byte, error) {
	conn, err := net.DialTimeout("unix", e.socket, e.timeout)
	if err != nil {
		return 0, nil, nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(e.timeout)); err != nil {
		return 0, nil, nil, err
	}
	req := method + " " + path + " HTTP/1.1\r\nHost: docker\r\nUser-Agent: rightsize-keeper\r\nConnection: close\r\n"
	if method != "GET" {
		req += "Content-Length: 0\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		return 0, nil, nil, err
	}
	return readResponse(bufio.NewReader(conn), method)
}

// readResponse reads one HTTP/1.x answer: its status, its headers (keys
// in lower case) and its body, sized by Content-Length, chunked, or up to
// the connection's end.
func readResponse(r *bufio.Reader, method string) (int, map[string]string, []byte, error) {
	for {
		line, err := readLine(r)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("reading the status line: %w", err)
		}
		proto, rest, _ := strings.Cut(line, " ")
		codeText, _, _ := strings.Cut(rest, " ")
		code, err := strconv.Atoi(codeText)
		if !strings.HasPrefix(proto, "HTTP/1.") || err != nil || code < 100 || code > 999 {
			return 0, nil, nil, fmt.Errorf("not an HTTP/1 answer: %q", line)
		}
		hdr := map[string]string{}
		chunked, length := false, int64(-1)
		for {
			h, err := readLine(r)
			if err != nil {
				return 0, nil, nil, fmt.Errorf("reading the headers: %w", err)
			}
			if h == "" {
				break
			}
			k, v, _ := strings.Cut(h, ":")
			k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
			if len(hdr) < 64 {
				hdr[k] = v
			}
			switch k {
			case "transfer-encoding":
				chunked = strings.EqualFold(v, "chunked")
			case "content-length":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return 0, nil, nil, fmt.Errorf("bad Content-Length %q", v)
				}
				length = n
			}
		}
		if code >= 100 && code < 200 {
			continue // an interim answer; the real one follows
		}
		if code == 204 || code == 304 || method == "HEAD" {
			return code, hdr, nil, nil
		}
		var body []byte
		switch {
		case chunked:
			body, err = readChunked(r)
		case length > maxBody:
			err = fmt.Errorf("an answer of %d bytes is more than the %d read", length, maxBody)
		case length >= 0:
			body = make([]byte, length)
			_, err = io.ReadFull(r, body)
		default:
			body, err = io.ReadAll(io.LimitReader(r, maxBody+1))
			if err == nil && len(body) > maxBody {
				err = fmt.Errorf("an answer of more than %d bytes", maxBody)
			}
		}
		if err != nil {
			return 0, nil, nil, fmt.Errorf("reading the body: %w", err)
		}
		return code, hdr, body, nil
	}
}

// readChunked reads a chunked body, trailers included.
func readChunked(r *bufio.Reader) ([]byte, error) {
	var body bytes.Buffer
	for {
		line, err := readLine(r)
		if err != nil {
			return nil, err
		}
		sizeText, _, _ := strings.Cut(line, ";")
		size, err := strconv.ParseInt(strings.TrimSpace(sizeText), 16, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("bad chunk size %q", line)
		}
		if size == 0 {
			for {
				t, err := readLine(r)
				if err != nil {
					return nil, err
				}
				if t == "" {
					return body.Bytes(), nil
				}
			}
		}
		if int64(body.Len())+size > maxBody {
			return nil, fmt.Errorf("an answer of more than %d bytes", maxBody)
		}
		if _, err := io.CopyN(&body, r, size); err != nil {
			return nil, err
		}
		if crlf, err := readLine(r); err != nil || crlf != "" {
			return nil, fmt.Errorf("no line end after a chunk (%q, %v)", crlf, err)
		}
	}
}

// readLine reads one line, without its CRLF (or LF). A line longer than
// the reader's buffer is an error, not a growing allocation.
func readLine(r *bufio.Reader) (string, error) {
	b, err := r.ReadSlice('\n')
	if err != nil {
		if err == io.EOF && len(b) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// engineInfo is what the keeper learns of its engine as it checks it.
type engineInfo struct {
	parallel int    // removals to run at once
	podman   bool   // the engine is Podman
	self     string // the keeper's own container id
}

// filterQuery is the filters parameter that selects what carries label
// key=value.
func filterQuery(key, value string) string { return filtersParam("label", key+"="+value) }

// filtersParam is the filters parameter of one filter (label, ancestor)
// with one value.
func filtersParam(filter, value string) string {
	b, _ := json.Marshal(map[string][]string{filter: {value}})
	return "filters=" + url.QueryEscape(string(b))
}

// check makes sure the socket leads to the engine this keeper runs on:
// the engine answers, and knows a container of this run's keeper name
// whose environment holds this keeper's nonce. A socket of another engine
// (a client in a container whose socket is not its engine's host's) would
// otherwise remove nothing, or another run's things. It returns what the
// keeper knows of its engine then.
func (e *engine) check(run, nonce string) (found engineInfo, err error) {
	// An engine may make a folder where a bind mount's source is missing
	// (Podman does): that is not the socket, and dialing it says only
	// "connection refused".
	if fi, err := os.Stat(e.socket); err == nil && fi.IsDir() {
		return found, fmt.Errorf("the mount at %s is a folder, not the engine's socket: the socket named for it is not on the engine's host, and the engine made a folder there in its place (remove it)", e.socket)
	}
	// A ping, not /version, which costs Podman a third of a second; its
	// headers say whether the engine is Podman.
	hdr, err := e.callHeaders("GET", "/_ping", nil)
	if err != nil {
		return found, fmt.Errorf("the engine does not answer through the socket %s: %w", e.socket, err)
	}
	var self struct {
		ID     string `json:"Id"`
		Config struct {
			Env    []string
			Labels map[string]string
		}
	}
	name := keeperPrefix + run
	if err := e.call("GET", "/containers/"+url.PathEscape(name)+"/json", &self); err != nil {
		return found, fmt.Errorf("the engine behind the socket %s does not know this keeper (%w): it is another engine than the one the keeper runs on", e.socket, err)
	}
	mine := false
	for _, kv := range self.Config.Env {
		if kv == envNonce+"="+nonce {
			mine = true
		}
	}
	if !mine || self.Config.Labels[labelKeeper] != run || self.ID == "" {
		return found, fmt.Errorf("the engine behind the socket %s has a %s that is not this keeper: it is another engine than the one the keeper runs on", e.socket, name)
	}
	// Docker's engine removes one container after another whatever the
	// parallelism, and a few at once only hide the round trips; Podman
	// removes in parallel (as package backend/docker finds).
	found = engineInfo{parallel: 4, self: self.ID}
	if hdr["libpod-api-version"] != "" {
		found.parallel, found.podman = 16, true
	}
	return found, nil
}
