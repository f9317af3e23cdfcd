// Command ryukstandin is a stand-in for testcontainers' reaper, Ryuk. It is
// not Ryuk and shares no code with it: it is what the benchmark harness
// (e2e/bench) runs in Ryuk's place where Ryuk's image cannot be pulled, so
// that testcontainers-go's side of crash-to-clean can be measured against
// something that behaves the way Ryuk's documentation and source say Ryuk
// behaves. What it copies:
//
//   - the protocol: TCP on RYUK_PORT (8080), one line per filter, in URL
//     query form (`label=k=v&label=k2=v2`), each answered with "ACK\n";
//   - the timing: after the last connection has gone, it waits
//     RYUK_RECONNECTION_TIMEOUT (10s); when no connection ever comes, it
//     waits RYUK_CONNECTION_TIMEOUT (1m); a connection in between cancels
//     the wait;
//   - the removal: the containers matching any filter (Ryuk's own aside),
//     one after another, forced and with their anonymous volumes, then the
//     networks matching any filter, then it exits.
//
// What it leaves out: volumes and images, a second look for objects made
// after the wait ended, retries, and signals. It talks to the engine at
// DOCKER_HOST (a unix:// socket) or /var/run/docker.sock, with nothing but
// the standard library, so that it builds into a static binary for an
// image FROM scratch. It prints "Started" once it listens: that is what
// testcontainers-go waits for in a reaper's log.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// The label testcontainers-go puts on its reaper container; such a
// container is never removed by a reaper.
const reaperLabel = "org.testcontainers.ryuk"

func main() {
	log.SetFlags(log.Ldate | log.Ltime | log.Lmicroseconds | log.LUTC)
	log.SetOutput(os.Stdout)
	if err := run(); err != nil {
		log.Printf("ryuk stand-in: %v", err)
		os.Exit(1)
	}
}

func run() error {
	port := envOr("RYUK_PORT", "8080")
	connTimeout := durationEnv("RYUK_CONNECTION_TIMEOUT", time.Minute)
	reconnTimeout := durationEnv("RYUK_RECONNECTION_TIMEOUT", 10*time.Second)
	eng, err := newEngine(os.Getenv("DOCKER_HOST"))
	if err != nil {
		return err
	}
	if err := eng.call(context.Background(), http.MethodGet, "/_ping", nil); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	r := &standin{filters: map[string]url.Values{}, change: make(chan int, 64)}
	go r.accept(ln)
	log.Printf("Started: a stand-in for Ryuk (not Ryuk), listening on %s; reconnection timeout %s", ln.Addr(), reconnTimeout)

	timer := time.NewTimer(connTimeout)
	clients := 0
wait:
	for {
		select {
		case d := <-r.change:
			clients += d
			if clients == 0 {
				timer.Reset(reconnTimeout)
			} else {
				timer.Stop()
			}
		case <-timer.C:
			break wait
		}
	}
	ln.Close()
	log.Printf("no client for %s: removing what the filters match", reconnTimeout)
	return r.prune(eng)
}

// standin holds the filters received so far and counts connections.
type standin struct {
	mu      sync.Mutex
	filters map[string]url.Values // by the line that gave them
	change  chan int              // +1 at each connection, -1 at its end
}

func (r *standin) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		r.change <- 1
		go r.serve(c)
	}
}

func (r *standin) serve(c net.Conn) {
	defer func() {
		c.Close()
		r.change <- -1
	}()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		q, err := url.ParseQuery(line)
		if err != nil {
			log.Printf("filter %q: %v", line, err)
		} else {
			r.mu.Lock()
			r.filters[line] = q
			r.mu.Unlock()
		}
		if _, err := io.WriteString(c, "ACK\n"); err != nil {
			return
		}
	}
}

// prune removes, for every filter, the matching containers one by one,
// then the matching networks.
func (r *standin) prune(eng *engine) error {
	r.mu.Lock()
	var all []url.Values
	for _, q := range r.filters {
		all = append(all, q)
	}
	r.mu.Unlock()
	ctx := context.Background()
	var errs []error
	removed := 0
	for _, q := range all {
		var cs []struct {
			ID     string
			Labels map[string]string
		}
		if err := eng.list(ctx, "/containers/json?all=1&filters=", q, &cs); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range cs {
			if c.Labels[reaperLabel] == "true" {
				continue
			}
			if err := eng.call(ctx, http.MethodDelete, "/containers/"+c.ID+"?force=1&v=1", nil); err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
		}
	}
	for _, q := range all {
		var ns []struct{ ID string }
		if err := eng.list(ctx, "/networks?filters=", q, &ns); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, n := range ns {
			if err := eng.call(ctx, http.MethodDelete, "/networks/"+n.ID, nil); err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
		}
	}
	log.Printf("removed %d containers and networks", removed)
	return errors.Join(errs...)
}

// engine is a Docker engine API client over a unix socket.
type engine struct {
	hc *http.Client
}

func newEngine(host string) (*engine, error) {
	sock := "/var/run/docker.sock"
	if host != "" {
		p, ok := strings.CutPrefix(host, "unix://")
		if !ok {
			return nil, fmt.Errorf("DOCKER_HOST %q: only unix:// sockets are supported", host)
		}
		sock = p
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	return &engine{hc: &http.Client{Transport: tr, Timeout: time.Minute}}, nil
}

// call makes one request; a 404 counts as done (the object is gone).
func (e *engine) call(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://engine"+path, nil)
	if err != nil {
		return err
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound && method == http.MethodDelete:
		return nil
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	case out != nil:
		return json.Unmarshal(body, out)
	}
	return nil
}

// list asks for the objects matching filter q (each key a filter type,
// each value one term: the engine's {"label":{"k=v":true}} form).
func (e *engine) list(ctx context.Context, path string, q url.Values, out any) error {
	f := map[string]map[string]bool{}
	for k, vs := range q {
		f[k] = map[string]bool{}
		for _, v := range vs {
			f[k][v] = true
		}
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return e.call(ctx, http.MethodGet, path+url.QueryEscape(string(b)), out)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func durationEnv(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil && d > 0 {
		return d
	}
	return def
}
