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
// engine's socket. This runs it twice, with RIGHTSIZE_BACKEND=docker (the
// default made explicit) and =memory, with DOCKER_HOST at a socket that
// records every connection and answers none; as root, the engine's
// default sockets (/var/run/docker.sock, Podman's) are replaced by the
// recorder too, in a mount namespace of the run's own, so a test that
// unsets DOCKER_HOST is caught as well.
func TestShortOpensNoEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("this test runs `go test -short ./...` itself")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	dir := t.TempDir()
	rec := &recorder{}
	sock := filepath.Join(dir, "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go rec.serve(ln)

	for _, be := range []string{"docker", "memory"} {
		t.Run(be, func(t *testing.T) {
			argv := []string{goBin, "test", "-short", "-count=1"}
			if raceBuilt() {
				// make test's own build: the run costs no compile.
				argv = append(argv, "-race")
			}
			argv = append(argv, "./...")
			if os.Geteuid() == 0 {
				if unshare, err := exec.LookPath("unshare"); err == nil {
					// The default sockets are bound over by the recorder
					// where they exist; a missing one cannot be opened
					// anyway.
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
				"RIGHTSIZE_BACKEND="+be,
				"DOCKER_HOST=unix://"+sock,
				"REC="+sock,
				"RIGHTSIZE_CACHE_DIR="+t.TempDir(),
				"RIGHTSIZE_TEST_KUBECONFIG=",
			)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("RIGHTSIZE_BACKEND=%s go test -short ./...: %v\n%s", be, err, failures(out))
			}
			if got := rec.take(); len(got) > 0 {
				t.Errorf("RIGHTSIZE_BACKEND=%s go test -short ./... opened the engine's socket %d times; first requests:\n%s", be, len(got), strings.Join(got[:min(len(got), 10)], "\n"))
			}
			t.Logf("RIGHTSIZE_BACKEND=%s go test -short ./...: %s", be, time.Since(start).Round(time.Second))
		})
	}
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
