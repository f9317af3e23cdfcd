// Package enginetest has what tests of more than one package need to put
// between a test and the engine.
package enginetest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// FailLook serves sock: the requests for the engine's info that
// testcontainers-go's own look at a candidate engine makes (its vanilla
// client's, before it has chosen) fail with a 500, as an engine that
// dropped them would; every other request, and the rest of its
// connection, is forwarded to the engine's socket as it is. It reports
// whether such a request came.
func FailLook(t *testing.T, sock, engine string) *atomic.Bool {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var failed atomic.Bool
	look := func(req *http.Request) bool {
		return strings.HasSuffix(req.URL.Path, "/info") && !strings.HasPrefix(req.Header.Get("User-Agent"), "tc-go/")
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				up, err := net.Dial("unix", engine)
				if err != nil {
					return
				}
				defer up.Close()
				upBr := bufio.NewReader(up)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if look(req) {
						failed.Store(true)
						_, _ = io.Copy(io.Discard, req.Body)
						body := `{"message":"flaky"}`
						fmt.Fprintf(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
						continue
					}
					if req.Write(up) != nil {
						return
					}
					resp, err := http.ReadResponse(upBr, req)
					if err != nil {
						return
					}
					err = resp.Write(c)
					resp.Body.Close()
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return &failed
}
