//go:build linux

package rightsize_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// `go test -short ./...` is the module's engine-free run (README): it
// passes whichever backend RIGHTSIZE_BACKEND names, and never opens an
// engine's socket. This runs it with each test binary run twice, through
// go test's -exec (one build and link serves both): with
// RIGHTSIZE_BACKEND=docker (the default made explicit) and =memory, each
// with DOCKER_HOST at a socket of its own that records every connection
// and answers none; as root, the engine's default sockets
// (/var/run/docker.sock, Podman's) are replaced by a third recorder, in a
// mount namespace of the run's own, so a test that unsets DOCKER_HOST is
// caught as well.
func TestShortOpensNoEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("this test runs `go test -short ./...` itself")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	dir := t.TempDir()
	backends := []string{"docker", "memory"}
	recorded := append([]string{"default"}, backends...)
	recs := map[string]*recorder{}
	sockets := map[string]string{}
	for _, name := range recorded {
		rec := &recorder{}
		sock := filepath.Join(dir, name+".sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go rec.serve(ln)
		recs[name], sockets[name] = rec, sock
	}
	// The -exec program: each test binary once per backend, saying which
	// before it starts, so a failure's output names its backend. Each
	// backend has a cache folder of its own, as two runs of go test had:
	// go test runs two binaries at once, one may be on each backend.
	wrapper := filepath.Join(dir, "each-backend")
	script := "#!/bin/sh\n"
	for _, be := range backends {
		script += fmt.Sprintf("echo 'short run: RIGHTSIZE_BACKEND=%[1]s'\nRIGHTSIZE_BACKEND=%[1]s DOCKER_HOST='unix://%[2]s' RIGHTSIZE_CACHE_DIR='%[3]s' \"$@\" || { echo 'short run: failed with RIGHTSIZE_BACKEND=%[1]s'; exit 1; }\n", be, sockets[be], t.TempDir())
	}
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	argv := []string{goBin, "test", "-short", "-count=1", "-exec", wrapper}
	if raceBuilt() {
		// make test's own build: the run costs no compile.
		argv = append(argv, "-race")
	}
	argv = append(argv, "./...")
	if os.Geteuid() == 0 {
		if unshare, err := exec.LookPath("unshare"); err == nil {
			// The default sockets are bound over by the recorder where
			// they exist; a missing one cannot be opened anyway.
			script := `set -e
for s in /var/run/docker.sock /run/podman/podman.sock; do
  if [ -S "$s" ]; then mount --bind "$REC" "$s"; fi
done
exec "$@"`
			argv = append([]string{unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh"}, argv...)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(),
		// Unset here, in case the wrapper misses a binary: the default
		// recorder then sees it.
		"RIGHTSIZE_BACKEND=",
		"DOCKER_HOST=unix://"+sockets["default"],
		"REC="+sockets["default"],
		"RIGHTSIZE_TEST_KUBECONFIG=",
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("go test -short ./... (RIGHTSIZE_BACKEND=docker, then =memory): %v\n%s", err, failures(out))
	}
	for _, name := range recorded {
		what := "with RIGHTSIZE_BACKEND=" + name + ", DOCKER_HOST's socket"
		if name == "default" {
			what = "an engine's default socket"
		}
		if got := recs[name].take(); len(got) > 0 {
			t.Errorf("go test -short ./... opened %s %d times; first requests:\n%s", what, len(got), strings.Join(got[:min(len(got), 10)], "\n"))
		}
	}
	t.Logf("go test -short ./..., each binary with RIGHTSIZE_BACKEND=docker then =memory: %s", time.Since(start).Round(time.Second))
}

// recorder is an engine that answers nothing and writes down the first
// line each connection sent.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			r.mu.Lock()
			r.seen = append(r.seen, fmt.Sprintf("%q", strings.TrimSpace(line)))
			r.mu.Unlock()
		}()
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seen
	r.seen = nil
	return s
}

// failures is the lines of go test's output that say what failed.
func failures(out []byte) string {
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "ok ") && !strings.Contains(l, "[no test files]") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
