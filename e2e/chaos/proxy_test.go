//go:build linux

package main

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestProxyHeard: the proxy notes whether the engine's answer to a
// removal reached its asker. One asker waits for it; another gives up
// before the engine answers, and the engine removes it all the same: the
// checker must not expect a fate to tell that removal as the asker's.
func TestProxyHeard(t *testing.T) {
	dir := t.TempDir()
	engineSock := filepath.Join(dir, "engine.sock")
	ln, err := net.Listen("unix", engineSock)
	if err != nil {
		t.Fatal(err)
	}
	slowDone := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1.41/networks/slow" {
			// The engine works on past the asker's deadline.
			time.Sleep(300 * time.Millisecond)
			defer close(slowDone)
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	p, err := startProxy(filepath.Join(dir, "proxy.sock"), engineSock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", p.path)
	}}}
	remove := func(name string, within time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, "http://engine/v1.41/networks/"+name, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := remove("quick", 10*time.Second); err != nil {
		t.Fatalf("a removal through the proxy: %v", err)
	}
	if err := remove("slow", 50*time.Millisecond); err == nil {
		t.Fatal("the asker with a 50 ms deadline heard the engine's answer, given after 300 ms")
	}
	select {
	case <-slowDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine never finished the slow removal")
	}
	// The proxy writes the late answer to the asker's closed connection
	// a moment after the engine gives it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		calls := append([]apiCall(nil), p.calls...)
		p.mu.Unlock()
		if len(calls) != 2 {
			t.Fatalf("the proxy noted %d calls, want the 2 removals: %+v", len(calls), calls)
		}
		if !calls[0].heard || calls[0].status != http.StatusNoContent {
			t.Fatalf("the quick removal: heard %t, status %d; want heard, 204", calls[0].heard, calls[0].status)
		}
		if calls[1].passed {
			if calls[1].heard || calls[1].status != http.StatusNoContent {
				t.Fatalf("the slow removal, whose asker had given up: heard %t, status %d; want not heard, 204", calls[1].heard, calls[1].status)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slow removal's answer never reached the proxy: %+v", calls[1])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
