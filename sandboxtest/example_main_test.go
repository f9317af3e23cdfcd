package sandboxtest_test

import (
	"net/http"
	"testing"

	"github.com/rightsize/rightsize-go/sandboxtest"
)

// Sandboxes started once for a whole package in TestMain and shared by
// every test: a web server from setup, a cache started by the first test
// that asks for it, both on a network of the suite's. Main stops them
// after the last test; if the binary dies first (a panic, `go test
// -timeout`, SIGKILL), the watchdog removes them.
//
// The example has no output: it is compiled, not run, because only a test
// binary's own TestMain can call Main. In a _test.go file, testMain and
// testHome are the functions TestMain(m *testing.M) and TestHome(t
// *testing.T), and web and cache are package variables.
func ExampleMain() {
	var (
		web   *sandboxtest.Guard
		cache *sandboxtest.SharedSandbox
	)

	testMain := func(m *testing.M) {
		sandboxtest.Main(m, func(s *sandboxtest.Suite) {
			net := s.NewNetwork()
			// A Start that fails ends setup: Main prints one line naming
			// the cause, removes the network, and exits 1.
			web = s.Start(sandboxtest.Spec{
				Image:    "nginx:1.27",
				Ports:    []string{"80/tcp"},
				Networks: []*sandboxtest.Network{net},
				Aliases:  []string{"web"},
			})
			cache = sandboxtest.Shared(sandboxtest.Spec{
				Image:    "redis:7",
				Ports:    []string{"6379/tcp"},
				Networks: []*sandboxtest.Network{net},
			})
		})
	}

	testHome := func(t *testing.T) {
		t.Parallel()
		// For(t): a failure (a port not published, say) fails this test;
		// the sandbox stays up for the others.
		resp, err := http.Get("http://" + web.For(t).Endpoint("80/tcp") + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()

		// The first test here starts the cache; the others wait for it
		// and get the same one.
		addr := cache.Get(t).Endpoint("6379/tcp")
		t.Log("cache at", addr)
	}

	_, _ = testMain, testHome
}
