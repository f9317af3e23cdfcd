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
// while the engine is still at work, and the engine removes it all the
// same: the checker must not expect a fate to tell that removal as the
// asker's. A request a fault answers in the engine's place is never sent.
func TestProxyHeard(t *testing.T) {
	dir := t.TempDir()
	engineSock := filepath.Join(dir, "engine.sock")
	ln, err := net.Listen("unix", engineSock)
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1.41/networks/slow" {
			// The engine works on until the asker has given up.
			close(arrived)
			<-release
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
	// Each removal on a connection of its own, to the proxy p is then.
	remove := func(ctx context.Context, name string) error {
		path := p.path
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, "http://engine/v1.41/networks/"+name, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := remove(context.Background(), "quick"); err != nil {
		t.Fatalf("a removal through the proxy: %v", err)
	}
	ctx, giveUp := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- remove(ctx, "slow") }()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow removal never reached the engine")
	}
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("the asker that gave up heard the engine's answer")
	}
	close(release) // the engine answers now, to an asker gone

	// The proxy passes the late answer on (and fails) a moment after,
	// then lets the connections go.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p.mu.Lock()
		calls := append([]apiCall(nil), p.calls...)
		open := len(p.conns)
		p.mu.Unlock()
		if len(calls) != 2 {
			t.Fatalf("the proxy noted %d calls, want the 2 removals: %+v", len(calls), calls)
		}
		if open == 0 {
			if !calls[0].sent || !calls[0].heard || calls[0].status != http.StatusNoContent {
				t.Errorf("the quick removal: sent %t, heard %t, status %d; want sent, heard, 204", calls[0].sent, calls[0].heard, calls[0].status)
			}
			if !calls[1].sent || calls[1].heard || calls[1].status != http.StatusNoContent {
				t.Errorf("the slow removal, whose asker had given up: sent %t, heard %t, status %d; want sent, not heard, 204", calls[1].sent, calls[1].heard, calls[1].status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not pass the answers on within 30 s: %+v", calls)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A fault that answers in the engine's place sends nothing on.
	f := newFaults(1)
	f.on, f.prob = faultError, 1
	fp, err := startProxy(filepath.Join(dir, "faults.sock"), engineSock, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fp.stop)
	p = fp
	if err := remove(context.Background(), "refused"); err != nil {
		t.Fatalf("a removal the fault answers 500: %v", err)
	}
	p.mu.Lock()
	if len(p.calls) != 1 {
		t.Fatalf("the fault proxy noted %d calls, want 1: %+v", len(p.calls), p.calls)
	}
	last := p.calls[0]
	p.mu.Unlock()
	if last.sent || last.heard || last.fault == "" {
		t.Errorf("a removal a fault answered: sent %t, heard %t, fault %q; want not sent, not heard, the fault named", last.sent, last.heard, last.fault)
	}
}
