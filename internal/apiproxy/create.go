package apiproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// create reads a create's body, asks the hook, forwards the create as the
// hook wants it, and its answer back.
func (c *conn) create(req *http.Request, head []byte, rt route) (<-chan error, bool) {
	kind := rt.kinds[0]
	tooLarge := func() (<-chan error, bool) {
		c.reply(http.StatusRequestEntityTooLarge, fmt.Sprintf("apiproxy: the body of a %s create is larger than %d bytes", kind, MaxCreateBody), true)
		return nil, false
	}
	localReply := func(status int, msg string) (<-chan error, bool) {
		if c.up != nil && c.upIdle == nil {
			c.watchUpstream() // still idle, and watched as such
		}
		ok := c.reply(status, msg, req.Close)
		return nil, ok && !req.Close
	}

	f := requestFraming(req)
	if f.length > MaxCreateBody {
		return tooLarge()
	}
	// The body is needed before anything is forwarded: a client waiting
	// for "100 Continue" is given it here (and the engine is not asked).
	expect := strings.EqualFold(strings.TrimSpace(req.Header.Get("Expect")), "100-continue")
	if expect {
		c.cw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if c.cw.Flush() != nil {
			return nil, false
		}
	}
	var body []byte
	var err error
	if f.chunked {
		body, err = readChunked(c.cr, MaxCreateBody)
	} else {
		body = make([]byte, f.length)
		_, err = io.ReadFull(c.cr, body)
	}
	switch {
	case errors.Is(err, errTooLarge):
		return tooLarge()
	case errors.Is(err, errBadChunk), errors.Is(err, errLineTooLong):
		c.reply(http.StatusBadRequest, "apiproxy: malformed request body: "+err.Error(), true)
		return nil, false
	case err != nil:
		return nil, false // the client hung up
	}

	plan, err := planCreate(kind, rt.nameInBody, req, body)
	if err != nil {
		return localReply(http.StatusBadRequest, err.Error())
	}
	if err := c.connectUpstream(); err != nil {
		c.reply(http.StatusBadGateway, err.Error(), true)
		return nil, false
	}
	labels, useName, err := c.p.hook.Admit(c.p.ctx, kind, plan.name, plan.clientLabels())
	if err != nil {
		return localReply(http.StatusInternalServerError, err.Error())
	}
	name := plan.name
	if useName != "" {
		name = useName
	}
	newHead, newBody := plan.apply(head, body, req, f, expect, labels, name)
	c.uw.Write(newHead)
	c.uw.Write(newBody)
	if err := c.uw.Flush(); err != nil {
		c.p.hook.Failed(kind, name, 0)
		c.abort()
		return nil, false
	}
	return c.answer(req, rt, c.watch(nil), &pending{kind: kind, name: name, created: rt.created})
}

// createPlan is a create's body, decoded, and what it asks for.
type createPlan struct {
	kind       string
	nameInBody bool
	doc        map[string]any
	name       string   // the name asked for
	labelKeys  []string // the keys of doc that mean "Labels", sorted
	nameKey    string   // nameInBody: the key of doc that means "Name", or ""
}

// planCreate decodes a create's body, and refuses one that cannot be
// guarded. The engines decode JSON with Go's encoding/json, which matches
// field names without regard to case: every spelling of "Labels" is
// merged, as the engine would; two spellings of a "Name" in the body (a
// network's, a Podman container's) are refused, since which one the
// engine would take depends on their order.
func planCreate(kind string, nameInBody bool, req *http.Request, body []byte) (*createPlan, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("apiproxy: cannot guard POST %s: its body "+format, append([]any{req.URL.Path}, args...)...)
	}
	doc, err := decodeObject(body)
	if err != nil {
		return nil, fail("%v", err)
	}
	pl := &createPlan{kind: kind, nameInBody: nameInBody, doc: doc, labelKeys: foldKeys(doc, "Labels")}
	for _, k := range pl.labelKeys {
		switch doc[k].(type) {
		case nil, map[string]any:
		default:
			return nil, fail("has %q that is not an object", k)
		}
	}
	if !nameInBody {
		q, _ := url.ParseQuery(req.URL.RawQuery) // the engine, too, keeps what parses
		pl.name = q.Get("name")
	} else {
		keys := foldKeys(doc, "Name")
		if len(keys) > 1 {
			return nil, fail("has %q: one name only", keys)
		}
		if len(keys) == 1 {
			pl.nameKey = keys[0]
			switch v := doc[pl.nameKey].(type) {
			case string:
				pl.name = v
			case nil:
			default:
				return nil, fail("has %q that is not a string", pl.nameKey)
			}
		}
	}
	return pl, nil
}

// clientLabels are the labels the client gave, every spelling merged as
// the engine merges them.
func (pl *createPlan) clientLabels() map[string]string {
	out := map[string]string{}
	for _, k := range pl.labelKeys {
		m, _ := pl.doc[k].(map[string]any)
		for lk, lv := range m {
			if s, ok := lv.(string); ok {
				out[lk] = s
			}
		}
	}
	return out
}

// decodeObject decodes a JSON object, keeping numbers as they were written.
func decodeObject(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, errors.New("is empty")
		}
		return nil, fmt.Errorf("is not a JSON object: %v", err)
	}
	if doc == nil {
		return nil, errors.New("is not a JSON object: null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("has content after its JSON object")
	}
	return doc, nil
}

func foldKeys(doc map[string]any, name string) []string {
	var keys []string
	for k := range doc {
		if strings.EqualFold(k, name) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// apply makes the create the hook wants: labels merged into "Labels" (the
// hook's win), the name set (in the query, or in the body). The head changes only where it must: the request line when
// the query does, and the framing (Content-Length; Expect is dropped once
// answered here). A create the hook changes nothing of goes as it came.
func (pl *createPlan) apply(head, body []byte, req *http.Request, f framing, expect bool, labels map[string]string, name string) (newHead, newBody []byte) {
	bodyChanged := false
	if len(labels) > 0 || len(pl.labelKeys) > 1 {
		merged := map[string]any{}
		for _, k := range pl.labelKeys {
			if m, ok := pl.doc[k].(map[string]any); ok {
				maps.Copy(merged, m)
			}
			delete(pl.doc, k)
		}
		for k, v := range labels {
			merged[k] = v
		}
		pl.doc["Labels"] = merged
		bodyChanged = true
	}
	uri := ""
	if name != pl.name {
		if !pl.nameInBody {
			path, _, _ := strings.Cut(req.RequestURI, "?")
			uri = path + "?" + setQueryParam(req.URL.RawQuery, "name", name)
		} else {
			if pl.nameKey != "" {
				delete(pl.doc, pl.nameKey)
			}
			pl.doc["Name"] = name
			bodyChanged = true
		}
	}
	newBody = body
	if bodyChanged {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(pl.doc) // what was decoded encodes
		newBody = b.Bytes()
	}
	if !bodyChanged && uri == "" && !f.chunked && !expect {
		return head, body
	}
	return rewriteHead(head, uri, len(newBody), expect), newBody
}

// setQueryParam replaces every key= of a raw query with one key=value at
// its end, leaving the rest as it was written.
func setQueryParam(raw, key, value string) string {
	var out []string
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, _, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil && dk == key {
			continue
		}
		out = append(out, part)
	}
	out = append(out, url.QueryEscape(key)+"="+url.QueryEscape(value))
	return strings.Join(out, "&")
}

// rewriteHead gives a request head with its request-target replaced (when
// uri is not ""), its framing fields replaced by Content-Length, and its
// Expect dropped when dropExpect. Every other line stays as it was.
func rewriteHead(head []byte, uri string, contentLength int, dropExpect bool) []byte {
	var b bytes.Buffer
	b.Grow(len(head) + 32)
	first, rest, _ := bytes.Cut(head, []byte("\n"))
	if uri != "" {
		line := strings.TrimSuffix(string(first), "\r")
		method, target, _ := strings.Cut(line, " ")
		_, proto, _ := strings.Cut(target, " ")
		b.WriteString(method + " " + uri + " " + proto + "\r\n")
	} else {
		b.Write(first)
		b.WriteByte('\n')
	}
	dropping := false
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if len(bytes.TrimSuffix(line, []byte("\r"))) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' { // an obsolete folded line
			if !dropping {
				b.Write(line)
				b.WriteByte('\n')
			}
			continue
		}
		n, _, _ := bytes.Cut(line, []byte(":"))
		n = bytes.TrimSpace(n)
		dropping = bytes.EqualFold(n, []byte("Content-Length")) || bytes.EqualFold(n, []byte("Transfer-Encoding")) ||
			dropExpect && bytes.EqualFold(n, []byte("Expect"))
		if !dropping {
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	b.WriteString("Content-Length: " + strconv.Itoa(contentLength) + "\r\n\r\n")
	return b.Bytes()
}
