package sandboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The examples that need an engine have no output: they are compiled, not
// run (an example cannot skip where no engine answers). In a _test.go file,
// each testX below is a func TestX(t *testing.T), testMain is func
// TestMain(m *testing.M), and the variables they share are package
// variables.

// One call starts a sandbox for a test. It is removed when the test ends,
// whatever ends it: t.Cleanup on the way out, the process's watchdog within
// about a second when the test binary is killed (SIGKILL, an OOM-kill, `go
// test -timeout`), the next test process's sweep when even the watchdog
// was. A failure to start fails the test with the cause.
func ExampleStart() {
	testDatabase := func(t *testing.T) {
		db := sandboxtest.Start(t, sandboxtest.Spec{
			Image: "postgres:16",
			Env:   map[string]string{"POSTGRES_PASSWORD": "test"},
			Ports: []string{"5432/tcp"},
			// Postgres says it is ready twice: once for its set-up run,
			// once for real.
			WaitingFor: wait.ForLog("database system is ready to accept connections").WithOccurrence(2).WithStartupTimeout(time.Minute),
		})
		dsn := "postgres://postgres:test@" + db.Endpoint("5432/tcp") + "/postgres?sslmode=disable"
		t.Log("connect to", dsn)
	}
	_ = testDatabase
}

// Sandboxes on a network of the test's reach each other by their aliases.
// The network is removed after them, when the test ends.
func ExampleNewNetwork() {
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
			Image:      "nginx:1.27",
			Env:        map[string]string{"DATABASE_URL": "postgres://postgres:test@db:5432/postgres"},
			Ports:      []string{"80/tcp"},
			Networks:   []*sandboxtest.Network{net},
			WaitingFor: wait.ForHTTP("/").WithPort("80/tcp"),
		})
		resp, err := http.Get("http://" + app.Endpoint("80/tcp") + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		t.Logf("%s answered %s: %d bytes", app.Name(), resp.Status, len(body))
	}
	_ = testAppWithDatabase
}

// What one sandbox writes to a named volume of the test's, the next one
// reads. The volume goes after them, when the test ends, and with the
// run when the test process dies.
func ExampleNewVolume() {
	testRestoresItsData := func(t *testing.T) {
		data := sandboxtest.NewVolume(t)
		seed := sandboxtest.Start(t, sandboxtest.Spec{
			Image:  "busybox:1.36",
			Cmd:    []string{"sleep", "300"},
			Mounts: []sandboxtest.Mount{{Volume: data, Path: "/data"}},
		})
		if res, err := seed.Exec(t.Context(), []string{"sh", "-c", "echo 42 > /data/answer"}); err != nil || res.ExitCode != 0 {
			t.Fatalf("seed: %v %v", res, err)
		}
		if err := seed.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		reader := sandboxtest.Start(t, sandboxtest.Spec{
			Image:  "busybox:1.36",
			Cmd:    []string{"sleep", "300"},
			Mounts: []sandboxtest.Mount{{Volume: data, Path: "/data", ReadOnly: true}},
		})
		res, err := reader.Exec(t.Context(), []string{"cat", "/data/answer"})
		if err != nil || res.Stdout != "42\n" {
			t.Fatalf("read back: %v %v", res, err)
		}
	}
	_ = testRestoresItsData
}

func ExampleNewImage() {
	testServesTheBuild := func(t *testing.T) {
		img := sandboxtest.NewImage(t, sandboxtest.Build{
			Dir:  "testdata/app", // a Dockerfile, and what it COPYs
			Args: map[string]string{"VERSION": "1.2"},
		})
		app := sandboxtest.Start(t, sandboxtest.Spec{Image: img.Name(), Ports: []string{"8080/tcp"}})
		_ = app.Endpoint("8080/tcp")
	}
	_ = testServesTheBuild
}

// Any testcontainers-go call, a module's included, gets what Start gives
// with Track(t) as its last option: a rightsize name and labels, the ledger
// line, the watchdog, ports where this process reaches them, and its
// removal when the test ends. Calling Terminate as well is harmless.
func ExampleTrack() {
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
		endpoint, err := redis.PortEndpoint(ctx, "6379/tcp", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Log("redis at", endpoint) // the same answer a guard's Endpoint gives
	}
	_ = testCache
}

// Main in TestMain sweeps what dead runs left, runs the tests, then removes
// whatever this run still has, and exits with the tests' code. Its Setup
// starts sandboxes shared by every test of the package.
func ExampleMain() {
	var db *sandboxtest.Guard
	testMain := func(m *testing.M) {
		sandboxtest.Main(m, sandboxtest.Setup(func(s *sandboxtest.Suite) {
			net := s.NewNetwork()
			// A Start that fails ends setup: Main prints one line naming
			// the cause, removes the network, and exits 1.
			db = s.Start(sandboxtest.Spec{
				Image:      "postgres:16",
				Env:        map[string]string{"POSTGRES_PASSWORD": "test"},
				Ports:      []string{"5432/tcp"},
				Networks:   []*sandboxtest.Network{net},
				Aliases:    []string{"db"},
				WaitingFor: wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
			})
		}))
	}
	testQuery := func(t *testing.T) {
		t.Parallel()
		// For(t): a failure (a port not published, say) fails this test;
		// the sandbox stays up for the others.
		t.Log("db at", db.For(t).Endpoint("5432/tcp"))
	}
	_, _ = testMain, testQuery
}

// GuardAll guards what the package's tests create without sandboxtest: a
// testcontainers-go module, the Docker client, a `docker run` a test
// starts. Each such container and network is in the run's ledger before
// the engine makes it, and goes when the binary ends, however it ends.
func ExampleGuardAll() {
	testMain := func(m *testing.M) {
		sandboxtest.Main(m, sandboxtest.GuardAll())
	}
	testModule := func(t *testing.T) {
		// No Track(t), no change to the call: the module's container is
		// the run's.
		c, err := testcontainers.Run(t.Context(), "redis:7-alpine",
			testcontainers.WithExposedPorts("6379/tcp"),
			testcontainers.WithWaitStrategy(wait.ForListeningPort("6379/tcp")))
		require.NoError(t, err)
		_ = c
	}
	_, _ = testMain, testModule
}

// With RIGHTSIZE_REUSE=1, a Spec that asks for Reuse gets a keep-alive
// sandbox: created once, adopted by every later test process asking for
// the same identity, never stopped by a test, never reaped. Its name comes
// from the identity hash the whole rightsize family computes, so a Kotlin,
// Rust or Node test on the same machine adopts it too. Without
// RIGHTSIZE_REUSE it is an ordinary sandbox: the same spec passes either
// way.
func ExampleSpec_reuse() {
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
	// The identity is the spec's image, command, environment, ports, memory
	// limit and files; its name is what every member of the family calls it.
	id := ledger.ReuseIdentity{Image: spec.Image, Command: spec.Cmd, Env: spec.Env, ExposedPorts: spec.Ports}
	fmt.Println(ledger.ReuseName(id.Hash()))
	// Output:
	// rz-reuse-799aad5a3338
}

// Exec runs a command in the sandbox, tied to this process: if the test
// binary dies, however it dies, the command's whole process group ends too.
func ExampleGuard_Exec() {
	testMigrations := func(t *testing.T) {
		db := sandboxtest.Start(t, sandboxtest.Spec{Image: "postgres:16", Env: map[string]string{"POSTGRES_PASSWORD": "test"}})
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		res, err := db.Exec(ctx, []string{"psql", "-U", "postgres", "-c", "select 1"})
		if err != nil {
			t.Fatal(err) // no shell in the image, the engine gone, …
		}
		if res.Ending != sandboxtest.Exited || res.ExitCode != 0 {
			t.Fatalf("psql: %v", res) // the command, its fate, its output
		}
	}
	_ = testMigrations
}

// An ExecResult is an answer, not an error: a command that failed or was
// killed says how, and why, with the tail of its output, in one value a
// failure message can print. Here, as Exec returns one whose context timed
// out.
func ExampleExecResult() {
	res := sandboxtest.ExecResult{
		Cmd:      []string{"sh", "-c", "echo migrating; sleep 600"},
		Ending:   sandboxtest.Killed,
		ExitCode: -1,
		Cause:    context.DeadlineExceeded,
		Stdout:   "migrating\n",
	}
	fmt.Println(res)
	fmt.Println("timed out:", errors.Is(res.Cause, context.DeadlineExceeded), "- stopped by the guard:", errors.Is(res.Cause, sandboxtest.ErrGuardStopped))
	// Output:
	// ["sh" "-c" "echo migrating; sleep 600"]: killed (context deadline exceeded)
	// stdout:
	// migrating
	// timed out: true - stopped by the guard: false
}

// A local program a test starts — the binary under test, a mock server —
// ends with the test, and with everything it started in turn, however the
// test binary dies.
func ExampleStartProcess() {
	testServer := func(t *testing.T) {
		srv := sandboxtest.StartProcess(t, exec.Command("./bin/server", "--listen", "127.0.0.1:8081"))
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := srv.WaitForPort(ctx, "127.0.0.1:8081"); err != nil {
			t.Fatalf("%v\n%s", err, srv.Output())
		}
		// … talk to 127.0.0.1:8081; the server, and its children, end
		// when the test does.
	}
	_ = testServer
}

// A testify suite's SetupSuite runs inside the test that suite.Run is
// called from: a sandbox it starts with that test's t lives for the whole
// suite, and is removed when the suite ends, or by the watchdog when the
// binary dies first.
type storeSuite struct {
	suite.Suite
	db *sandboxtest.Guard
}

func (s *storeSuite) SetupSuite() {
	s.db = sandboxtest.Start(s.T(), sandboxtest.Spec{
		Image:      "postgres:16",
		Env:        map[string]string{"POSTGRES_PASSWORD": "test"},
		Ports:      []string{"5432/tcp"},
		WaitingFor: wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
	})
}

func (s *storeSuite) TestConnect() {
	require.NotEmpty(s.T(), s.db.For(s.T()).Endpoint("5432/tcp"))
}

func Example_testifySuite() {
	testStore := func(t *testing.T) { suite.Run(t, new(storeSuite)) }
	_ = testStore
}
