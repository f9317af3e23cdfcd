package apiproxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// A build is admitted before it reaches the engine, its labels parameter
// merged with the hook's (every other parameter as it was), and its body,
// the build context, sent as it came, chunked or not.
func TestBuildLabelled(t *testing.T) {
	const progress = `{"stream":"Step 1/1 : FROM scratch"}` + "\n" + `{"aux":{"ID":"sha256:abc"}}` + "\n"
	for _, chunked := range []bool{false, true} {
		e, got := captureEngine(t, http.StatusOK, progress)
		h := &recHook{labels: map[string]string{"run": "r1", "keep": "hook"}, names: map[string]string{KindImage: "rz-r1-1"}}
		p := startProxy(t, e.addr(), h)
		context := strings.Repeat("tar bytes \x00\x01", 1000)
		var body io.Reader = strings.NewReader(context)
		if chunked {
			body = io.MultiReader(strings.NewReader(context))
		}
		q := "t=app%3A1&labels=" + url.QueryEscape(`{"keep":"client","mine":"x"}`) + "&t=app%3A2&rm=1"
		req, _ := http.NewRequest(http.MethodPost, "http://docker/v1.41/build?"+q, body)
		req.Header.Set("Content-Type", "application/x-tar")
		resp, err := unixClient(p.Addr()).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != progress {
			t.Errorf("the client got %d %q", resp.StatusCode, b)
		}
		admits, created, _ := h.seen()
		if !reflect.DeepEqual(admits, []string{"image "}) || len(created) != 0 {
			t.Errorf("admits %q, created %q; want one image admitted, none created", admits, created)
		}
		if !reflect.DeepEqual(h.given, []map[string]string{{"keep": "client", "mine": "x"}}) {
			t.Errorf("the hook was given labels %v", h.given)
		}
		g := <-got
		if string(g.body) != context {
			t.Errorf("the engine got a body of %d bytes, want the %d sent", len(g.body), len(context))
		}
		u, _ := url.Parse(g.uri)
		eq := u.Query()
		var labels map[string]string
		if err := json.Unmarshal([]byte(eq.Get("labels")), &labels); err != nil {
			t.Fatalf("labels %q: %v", eq.Get("labels"), err)
		}
		if want := map[string]string{"keep": "hook", "mine": "x", "run": "r1"}; !reflect.DeepEqual(labels, want) {
			t.Errorf("the engine got labels %v, want %v", labels, want)
		}
		if !reflect.DeepEqual(eq["t"], []string{"app:1", "app:2"}) || eq.Get("rm") != "1" || u.Path != "/v1.41/build" {
			t.Errorf("the engine got %s: the rest of the query changed", g.uri)
		}
	}
}

// A build the hook refuses never reaches the engine; nor does one whose
// labels parameter the engine could not read either.
func TestBuildRefused(t *testing.T) {
	for _, q := range []string{"t=x", "labels=" + url.QueryEscape(`["not","an","object"]`)} {
		e, got := captureEngine(t, http.StatusOK, "")
		h := &recHook{refuse: []string{""}}
		p := startProxy(t, e.addr(), h)
		req, _ := http.NewRequest(http.MethodPost, "http://docker/build?"+q, strings.NewReader("ctx"))
		resp, err := unixClient(p.Addr()).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			t.Errorf("%s: the client got %d, want a refusal", q, resp.StatusCode)
		}
		select {
		case g := <-got:
			t.Errorf("%s: the engine got %s", q, g.uri)
		default:
		}
	}
}

// A named volume's create is a create: admitted, labelled, named by the
// hook when the client named none.
func TestCreateVolume(t *testing.T) {
	const answer = `{"Name":"rz-r1-2","Driver":"local"}`
	e, got := captureEngine(t, http.StatusCreated, answer)
	h := &recHook{labels: map[string]string{"run": "r1"}, names: map[string]string{KindVolume: "rz-r1-2"}}
	p := startProxy(t, e.addr(), h)
	req, _ := http.NewRequest(http.MethodPost, "http://docker/v1.41/volumes/create", strings.NewReader(`{"Name":"","Labels":{"a":"b"}}`))
	resp, err := unixClient(p.Addr()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("the client got %d", resp.StatusCode)
	}
	if admits, _, _ := h.seen(); !reflect.DeepEqual(admits, []string{"volume "}) {
		t.Errorf("admits %q", admits)
	}
	doc := decodeNumbers(t, (<-got).body)
	labels, _ := doc["Labels"].(map[string]any)
	if doc["Name"] != "rz-r1-2" || labels["run"] != "r1" || labels["a"] != "b" {
		t.Errorf("the engine got %v", doc)
	}
}
