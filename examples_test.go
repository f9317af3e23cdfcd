package rightsize_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The examples that need an engine have no output: they are compiled, not
// run. In a _test.go file, each testX below is a func TestX(t *testing.T),
// testMain is func TestMain(m *testing.M), and the variables they share
// are package variables. The examples that run (Example_reuse) need no
// engine.

// One call starts a sandbox for a test. It is removed when the test ends,
// whatever ends it: t.Cleanup on the way out, the process's watchdog within
// about a second when the test binary is killed (SIGKILL, an OOM-kill, `go
// test -timeout`), the next test process's sweep when even the watchdog
// was. A failure to start fails the test with the cause.
func Example_start() {
	testHome := func(t *testing.T) {
		web := sandboxtest.Start(t, sandboxtest.Spec{
			Image:      "nginx:1.27",
			Ports:      []string{"80/tcp"}, // published on 127.0.0.1 only
			WaitingFor: wait.ForListeningPort("80/tcp"),
		})
		resp, err := http.Get("http://" + web.Endpoint("80/tcp") + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		t.Logf("%s answered %s: %d bytes", web.Name(), resp.Status, len(body))
	}
	_ = testHome
}

// Sandboxes on a network of the test's reach each other by their aliases.
// The network is removed after them, when the test ends.
func Example_network() {
	testAppWithDatabase := func(t *testing.T) {
		net := sandboxtest.NewNetwork(t)
		sandboxtest.Start(t, sandboxtest.Spec{
			Image:      "postgres:16",
			Env:        map[string]string{"POSTGRES_PASSWORD": "test"},
			Networks:   []*sandboxtest.Network{net},
			Aliases:    []string{"db"},
			WaitingFor: wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
		})
		app := sandboxtest.Start(t, sandboxtest.Spec{
			Image:    "example.com/app:latest",
			Env:      map[string]string{"DATABASE_URL": "postgres://postgres:test@db:5432/postgres"},
			Ports:    []string{"8080/tcp"},
			Networks: []*sandboxtest.Network{net},
		})
		t.Log("app at", app.Endpoint("8080/tcp"))
	}
	_ = testAppWithDatabase
}

// Any testcontainers-go call, a module's included, gets what Start gives
// with Track(t) as its last option: a rightsize name and labels, the ledger
// line, the watchdog, ports on the loopback address, and its removal when
// the test ends. Calling Terminate as well is harmless.
func Example_track() {
	testCache := func(t *testing.T) {
		ctx := context.Background()
		redis, err := testcontainers.Run(ctx, "redis:7-alpine",
			testcontainers.WithExposedPorts("6379/tcp"),
			testcontainers.WithWaitStrategy(wait.ForListeningPort("6379/tcp")),
			sandboxtest.Track(t), // last, so that nothing renames the container
		)
		if err != nil {
			t.Fatal(err)
		}
		port, err := redis.MappedPort(ctx, "6379/tcp")
		if err != nil {
			t.Fatal(err)
		}
		t.Log("redis at 127.0.0.1:" + port.Port())
	}
	_ = testCache
}

// With RIGHTSIZE_REUSE=1, a Spec that asks for Reuse gets a keep-alive
// sandbox: created once, adopted by every later test process asking for
// the same identity, never stopped by a test, never reaped. Its name comes
// from the identity hash the whole rightsize family computes, so a Kotlin,
// Rust or Node test on the same machine adopts it too.
func Example_reuse() {
	spec := sandboxtest.Spec{
		Image: "redis:7-alpine",
		Env:   map[string]string{"A": "1", "B": "2"},
		Ports: []string{"6379/tcp"},
		Reuse: true,
	}
	testWithWarmCache := func(t *testing.T) {
		redis := sandboxtest.Start(t, spec) // adopted when it already runs
		t.Log(redis.Name(), "at", redis.Endpoint("6379/tcp"))
	}
	_ = testWithWarmCache

	hash := sandboxtest.ReuseIdentity(spec).Hash()
	fmt.Println(hash)
	fmt.Println(ledger.ReuseName(hash))
	// Output:
	// 799aad5a3338ce3d36999c7ff2733d4673c0592d417563f334544693ec1907a5
	// rz-reuse-799aad5a3338
}

// Main in TestMain sweeps what dead runs left, runs the tests, then removes
// whatever this run still has, and exits with the tests' code. Its setup
// starts sandboxes shared by every test of the package; Shared starts one
// on first use.
func Example_main() {
	var (
		web   *sandboxtest.Guard
		cache = sandboxtest.Shared(sandboxtest.Spec{Image: "redis:7-alpine", Ports: []string{"6379/tcp"}})
	)
	testMain := func(m *testing.M) {
		sandboxtest.Main(m, func(s *sandboxtest.Suite) {
			web = s.Start(sandboxtest.Spec{Image: "nginx:1.27", Ports: []string{"80/tcp"}})
		})
	}
	testBoth := func(t *testing.T) {
		t.Log("web at", web.For(t).Endpoint("80/tcp"))       // For(t): a failure fails this test
		t.Log("cache at", cache.Get(t).Endpoint("6379/tcp")) // started by the first test asking
	}
	_, _ = testMain, testBoth
}
