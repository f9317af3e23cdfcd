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
// engine's socket. This runs it with each test binary run once per
// backend, through go test's -exec (one build and link serves them all):
// RIGHTSIZE_BACKEND=docker (the default made explicit), memory,
// kubernetes and msb, each with DOCKER_HOST at a socket of its own that
// records every connection and answers none. Every run's KUBECONFIG names
// an API server that records and answers nothing, and its MSB_PATH an msb
// that writes down its arguments and fails, so a test that reaches a
// cluster or microsandbox is caught too. As root, the engine's default
// sockets (/var/run/docker.sock, Podman's) are replaced by one more
// recorder, in a mount namespace of the run's own, so a test that unsets
// DOCKER_HOST is caught as well.
func TestShortOpensNoEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("this test runs `go test -short ./...` itself")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	dir := t.TempDir()
	backends := []string{"docker", "memory", "kubernetes", "msb"}
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
	// A cluster: a kubeconfig whose server records every connection.
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { apiLn.Close() })
	recs["api"] = &recorder{}
	go recs["api"].serve(apiLn)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: recorder
  cluster:
    server: http://%s
contexts:
- name: recorder
  context:
    cluster: recorder
    user: recorder
    namespace: short
users:
- name: recorder
  user:
    token: none
current-context: recorder
`, apiLn.Addr())), 0o600); err != nil {
		t.Fatal(err)
	}
	// microsandbox: an msb that writes down how it was called, and fails.
	msbCalls := filepath.Join(dir, "msb-calls")
	msb := filepath.Join(dir, "msb")
	if err := os.WriteFile(msb, []byte("#!/bin/sh\necho \"$*\" >> '"+msbCalls+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
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
		"KUBECONFIG="+kubeconfig,
		"MSB_PATH="+msb,
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("go test -short ./... (RIGHTSIZE_BACKEND=%s, in turn): %v\n%s", strings.Join(backends, ", "), err, failures(out))
	}
	if b, err := os.ReadFile(msbCalls); err == nil {
		t.Errorf("go test -short ./... ran the msb MSB_PATH names:\n%s", b)
	}
	for _, name := range append(recorded, "api") {
		what := "with RIGHTSIZE_BACKEND=" + name + ", DOCKER_HOST's socket"
		switch name {
		case "default":
			what = "an engine's default socket"
		case "api":
			what = "the API server KUBECONFIG names"
		}
		if got := recs[name].take(); len(got) > 0 {
			t.Errorf("go test -short ./... opened %s %d times; first requests:\n%s", what, len(got), strings.Join(got[:min(len(got), 10)], "\n"))
		}
	}
	t.Logf("go test -short ./..., each binary with RIGHTSIZE_BACKEND=%s in turn: %s", strings.Join(backends, ", "), time.Since(start).Round(time.Second))
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
