package apiproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// The HTTP/1.1 framing the proxy needs, on raw bytes: heads are forwarded
// as they were read (net/http only parses a copy of them), and bodies as
// they come, chunked ones with their own chunk lines. Every copy flushes
// its destination before a read that may block, and only then: data is
// held only while more of it is already at hand.

var (
	errHeadTooLarge = errors.New("head too large")
	errLineTooLong  = errors.New("chunk line too long")
	errBadChunk     = errors.New("malformed chunked encoding")
	errTooLarge     = errors.New("body too large")
)

// maxChunkLine bounds a chunk-size line (with its extensions).
const maxChunkLine = 4096

// flushWriter is where a copy writes: a bufio.Writer, or a holdWriter.
type flushWriter interface {
	io.Writer
	Flush() error
}

// dstError is a copy's failure to write: the source is not to blame.
type dstError struct{ error }

func (e dstError) Unwrap() error { return e.error }

// readHead reads a message's head, through the blank line that ends it,
// appended to buf[:0]. Blank lines before it are skipped (RFC 9112 §2.2).
// It returns io.EOF when the connection ended cleanly before any of it.
func readHead(src *bufio.Reader, buf []byte, max int) ([]byte, error) {
	head := buf[:0]
	lineStart := 0
	for {
		frag, err := src.ReadSlice('\n')
		if len(head)+len(frag) > max {
			return head, errHeadTooLarge
		}
		head = append(head, frag...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(head) == 0:
			return head, io.EOF
		case err == io.EOF:
			return head, io.ErrUnexpectedEOF
		case err != nil:
			return head, err
		}
		if isBlankLine(head[lineStart:]) {
			if lineStart == 0 {
				head = head[:0]
				continue
			}
			return head, nil
		}
		lineStart = len(head)
	}
}

func isBlankLine(l []byte) bool {
	return len(l) == 1 && l[0] == '\n' || len(l) == 2 && l[0] == '\r' && l[1] == '\n'
}

// headParser parses heads with net/http, reusing its readers.
type headParser struct {
	br  bytes.Reader
	buf *bufio.Reader
}

func (h *headParser) reader(head []byte) *bufio.Reader {
	h.br.Reset(head)
	if h.buf == nil {
		h.buf = bufio.NewReaderSize(&h.br, 4096)
	} else {
		h.buf.Reset(&h.br)
	}
	return h.buf
}

// request parses a request head. Its Body is not to be read.
func (h *headParser) request(head []byte) (*http.Request, error) {
	return http.ReadRequest(h.reader(head))
}

// response parses the head of the answer to a request of that method. Its
// Body is not to be read.
func (h *headParser) response(head []byte, method string) (*http.Response, error) {
	return http.ReadResponse(h.reader(head), &http.Request{Method: method})
}

// framing is how a message's body ends.
type framing struct {
	length         int64 // when neither of the others
	chunked        bool
	closeDelimited bool // at the end of the connection
}

func requestFraming(req *http.Request) framing {
	if isChunked(req.TransferEncoding) {
		return framing{chunked: true}
	}
	return framing{length: max(req.ContentLength, 0)}
}

func responseFraming(method string, resp *http.Response) framing {
	s := resp.StatusCode
	switch {
	case method == http.MethodHead || s/100 == 1 || s == http.StatusNoContent || s == http.StatusNotModified:
		return framing{}
	case isChunked(resp.TransferEncoding):
		return framing{chunked: true}
	case resp.ContentLength >= 0:
		return framing{length: resp.ContentLength}
	default:
		return framing{closeDelimited: true}
	}
}

func isChunked(te []string) bool { return len(te) > 0 && strings.EqualFold(te[0], "chunked") }

// copyBody copies a body of that framing (not a close-delimited one) from
// src to dst, as it comes, and flushes dst.
func copyBody(dst flushWriter, src *bufio.Reader, f framing) error {
	var err error
	switch {
	case f.chunked:
		err = copyChunked(dst, src)
	case f.length > 0:
		err = copyExact(dst, src, f.length)
	}
	if err != nil {
		return err
	}
	if err := dst.Flush(); err != nil {
		return dstError{err}
	}
	return nil
}

// copyExact copies n bytes, flushing dst whenever src has nothing at hand.
// The data goes from src's buffer to dst's (or straight to dst's
// connection when it is large) without a buffer of its own.
func copyExact(dst flushWriter, src *bufio.Reader, n int64) error {
	for n > 0 {
		if src.Buffered() == 0 {
			if err := dst.Flush(); err != nil {
				return dstError{err}
			}
			if _, err := src.Peek(1); err != nil {
				return unexpected(err)
			}
		}
		b, _ := src.Peek(int(min(int64(src.Buffered()), n)))
		_, err := dst.Write(b)
		src.Discard(len(b))
		if err != nil {
			return dstError{err}
		}
		n -= int64(len(b))
	}
	return nil
}

// copyChunked copies a chunked body, chunk lines and trailers as they are.
func copyChunked(dst flushWriter, src *bufio.Reader) error {
	for {
		line, err := readLine(src, dst, maxChunkLine)
		if err != nil {
			return err
		}
		size, err := parseChunkSize(line)
		if err != nil {
			return err
		}
		if _, err := dst.Write(line); err != nil {
			return dstError{err}
		}
		if size == 0 {
			return copyTrailers(dst, src)
		}
		if err := copyExact(dst, src, size); err != nil {
			return err
		}
		crlf, err := readLine(src, dst, maxChunkLine)
		if err != nil {
			return err
		}
		if !isBlankLine(crlf) {
			return errBadChunk
		}
		if _, err := dst.Write(crlf); err != nil {
			return dstError{err}
		}
	}
}

// copyTrailers copies the trailer section through its blank line; dst is
// nil to skip it.
func copyTrailers(dst flushWriter, src *bufio.Reader) error {
	total := 0
	for {
		l, err := readLine(src, dst, maxHeadBytes-total)
		if err != nil {
			return err
		}
		total += len(l)
		if dst != nil {
			if _, err := dst.Write(l); err != nil {
				return dstError{err}
			}
		}
		if isBlankLine(l) {
			return nil
		}
	}
}

// readChunked decodes a chunked body of at most limit bytes.
func readChunked(src *bufio.Reader, limit int64) ([]byte, error) {
	var out []byte
	for {
		line, err := readLine(src, nil, maxChunkLine)
		if err != nil {
			return nil, err
		}
		size, err := parseChunkSize(line)
		if err != nil {
			return nil, err
		}
		if size == 0 {
			return out, copyTrailers(nil, src)
		}
		if size > limit-int64(len(out)) {
			return nil, errTooLarge
		}
		n := len(out)
		out = append(out, make([]byte, size)...)
		if _, err := io.ReadFull(src, out[n:]); err != nil {
			return nil, unexpected(err)
		}
		crlf, err := readLine(src, nil, maxChunkLine)
		if err != nil {
			return nil, err
		}
		if !isBlankLine(crlf) {
			return nil, errBadChunk
		}
	}
}

// readLine reads through the next "\n", flushing dst (when not nil) first
// if that may block. The line is src's until the next read of src.
func readLine(src *bufio.Reader, dst flushWriter, max int) ([]byte, error) {
	var acc []byte
	for {
		if dst != nil {
			if b, _ := src.Peek(src.Buffered()); bytes.IndexByte(b, '\n') < 0 {
				if err := dst.Flush(); err != nil {
					return nil, dstError{err}
				}
			}
		}
		frag, err := src.ReadSlice('\n')
		if len(acc)+len(frag) > max {
			return nil, errLineTooLong
		}
		switch {
		case err == nil && acc == nil:
			return frag, nil
		case err == nil:
			return append(acc, frag...), nil
		case err != bufio.ErrBufferFull:
			return nil, unexpected(err)
		}
		acc = append(acc, frag...)
	}
}

// parseChunkSize reads a chunk-size line: hex digits, then optional
// whitespace and extensions.
func parseChunkSize(line []byte) (int64, error) {
	s := bytes.TrimRight(line, "\r\n")
	if i := bytes.IndexByte(s, ';'); i >= 0 {
		s = s[:i]
	}
	s = bytes.TrimRight(s, " \t")
	if len(s) == 0 || len(s) > 15 {
		return 0, fmt.Errorf("%w: chunk size %q", errBadChunk, s)
	}
	// Base 16 given: no sign, no prefix, no underscores are taken.
	n, err := strconv.ParseUint(string(s), 16, 63)
	if err != nil {
		return 0, fmt.Errorf("%w: chunk size %q", errBadChunk, s)
	}
	return int64(n), nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// closeWrite half-closes c: the peer reads end-of-file, and may still
// write.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// holdWriter holds what is written, up to limit bytes; past that it writes
// what it held to spill, and then everything, as it comes.
type holdWriter struct {
	buf     []byte
	limit   int
	spill   *bufio.Writer
	spilled bool
}

func (h *holdWriter) Write(p []byte) (int, error) {
	if !h.spilled && len(h.buf)+len(p) <= h.limit {
		h.buf = append(h.buf, p...)
		return len(p), nil
	}
	if !h.spilled {
		h.spilled = true
		if _, err := h.spill.Write(h.buf); err != nil {
			return 0, err
		}
		h.buf = nil
	}
	if _, err := h.spill.Write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *holdWriter) Flush() error {
	if h.spilled {
		return h.spill.Flush()
	}
	return nil
}
