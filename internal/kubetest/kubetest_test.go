package kubetest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// outcome is what Config did to a test: returned, skipped or failed.
type outcome struct {
	testing.TB
	skipped, failed string
}

func (o *outcome) Helper() {}
func (o *outcome) Skipf(format string, args ...any) {
	o.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (o *outcome) Fatalf(format string, args ...any) {
	o.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// config runs Config against a stand-in test and says what it did.
func config(t *testing.T) *outcome {
	t.Helper()
	o := &outcome{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Config(o)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Config did not return within a minute")
	}
	return o
}

// kubeconfig writes a kubeconfig for server and returns its path.
func kubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	body := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `"}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func readyz(answer string, code int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
		fmt.Fprint(w, answer)
	}))
}

// A test that asks for the cluster skips where none was started, and fails,
// never skips, where one was named but does not answer: a gate must not
// pass on tests that never ran.
func TestConfigSkipsOrFails(t *testing.T) {
	defer func(d time.Duration) { readyTimeout = d }(readyTimeout)
	readyTimeout = time.Second

	notReady := readyz("[-]etcd failed: reason withheld\nreadyz check failed", http.StatusInternalServerError)
	defer notReady.Close()
	ready := readyz("ok", http.StatusOK)
	defer ready.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()

	for _, c := range []struct {
		name, env, skip, fail string
	}{
		{name: "unset", skip: EnvKubeconfig + " is not set"},
		{name: "no file", env: filepath.Join(t.TempDir(), "absent"), fail: "no such file"},
		{name: "nothing listens", env: kubeconfig(t, closed), fail: "connection refused"},
		{name: "not ready", env: kubeconfig(t, notReady.URL), fail: "etcd failed"},
		{name: "ready", env: kubeconfig(t, ready.URL)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(EnvKubeconfig, c.env)
			o := config(t)
			switch {
			case c.skip != "" && !strings.Contains(o.skipped, c.skip):
				t.Errorf("want a skip saying %q; skipped %q, failed %q", c.skip, o.skipped, o.failed)
			case c.fail != "" && (o.skipped != "" || !strings.Contains(o.failed, c.fail)):
				t.Errorf("want a failure saying %q; skipped %q, failed %q", c.fail, o.skipped, o.failed)
			case c.skip == "" && c.fail == "" && (o.skipped != "" || o.failed != ""):
				t.Errorf("want a config; skipped %q, failed %q", o.skipped, o.failed)
			}
		})
	}
}
