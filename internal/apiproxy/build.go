package apiproxy

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strings"
)

// build asks the hook about an image build, sets the labels it wants in
// the build's query (the engine puts them on the image it makes), and
// forwards the build: its body, the build context, and its answer, the
// build's progress, stream as they came. The hook names the build
// (Admit's useName) so that its ledger line exists before the engine
// starts; nothing of the answer is held, so Created is never called.
func (c *conn) build(req *http.Request, head []byte, rt route) (<-chan error, bool) {
	q, _ := url.ParseQuery(req.URL.RawQuery) // the engine, too, keeps what parses
	client := map[string]string{}
	if v := q.Get("labels"); v != "" {
		if err := json.Unmarshal([]byte(v), &client); err != nil {
			c.reply(http.StatusBadRequest, "apiproxy: cannot guard POST "+req.URL.Path+": its labels are not a JSON object of strings: "+err.Error(), true)
			return nil, false
		}
	}
	if err := c.connectUpstream(); err != nil {
		c.reply(http.StatusBadGateway, err.Error(), true)
		return nil, false
	}
	add, _, err := c.p.hook.Admit(c.p.ctx, rt.kinds[0], "", maps.Clone(client))
	if err != nil {
		// The build context may still be coming: the connection ends.
		c.reply(http.StatusInternalServerError, err.Error(), true)
		return nil, false
	}
	if len(add) > 0 {
		maps.Copy(client, add)
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(client) // strings encode
		path, _, _ := strings.Cut(req.RequestURI, "?")
		head = replaceTarget(head, path+"?"+setQueryParam(req.URL.RawQuery, "labels", strings.TrimSpace(b.String())))
	}
	return c.forward(req, head, rt)
}

// replaceTarget gives a request head with its request-target replaced by
// uri; every header line stays as it was, framing included.
func replaceTarget(head []byte, uri string) []byte {
	first, rest, _ := bytes.Cut(head, []byte("\n"))
	line := strings.TrimSuffix(string(first), "\r")
	method, target, _ := strings.Cut(line, " ")
	_, proto, _ := strings.Cut(target, " ")
	out := make([]byte, 0, len(head)+len(uri))
	out = append(out, method+" "+uri+" "+proto+"\r\n"...)
	return append(out, rest...)
}
