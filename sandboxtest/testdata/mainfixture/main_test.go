package mainfixture_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/probe"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The environment suite_test.go steers the fixture with.
const (
	// EnvImage is the image to run: the busybox test image, whose /server
	// answers HTTP.
	envImage = "RZ_FIXTURE_IMAGE"
	// EnvRunIDFile is where setup writes this run's id, for the caller to
	// look for what the run left.
	envRunIDFile = "RZ_FIXTURE_RUNID_FILE"
	// EnvMode: "" (all pass), "panic" (a test panics), "block" (a test
	// blocks until -timeout), "exit3" (a test calls os.Exit(3)), "setupfail"
	// (setup uses a sandbox of an image that does not exist), "testneeds"
	// (TestOne needs that sandbox; setup does not use it).
	envMode = "RZ_FIXTURE_MODE"

	// MissingImage is what setup starts in mode "setupfail".
	missingImage = "rightsize-test/does-not-exist:mainfixture"
	port         = "8080/tcp"
)

var (
	mode = os.Getenv(envMode)

	// web and cache are set up by setup and shared by the tests; missing
	// is of an image that does not exist.
	web, cache, missing *sandboxtest.Guard
)

func TestMain(m *testing.M) {
	sandboxtest.Main(m, sandboxtest.Setup(setup))
}

func setup(s *sandboxtest.Suite) {
	sess, err := probe.Session(context.Background())
	if err != nil {
		s.Fatalf("session: %v", err)
	}
	if err := os.WriteFile(os.Getenv(envRunIDFile), []byte(sess.RunID()), 0o600); err != nil {
		s.Fatalf("run id: %v", err)
	}
	img := os.Getenv(envImage)
	if img == "" {
		s.Fatalf("%s is not set", envImage)
	}
	net := s.NewNetwork()
	spec := sandboxtest.Spec{
		Image:      img,
		Cmd:        []string{"/server", "8080"},
		Ports:      []string{port},
		Networks:   []*sandboxtest.Network{net},
		WaitingFor: wait.ForLog("ready"),
	}
	web = s.Start(spec)
	missing = s.Start(sandboxtest.Spec{Image: missingImage})
	if mode == "setupfail" {
		missing.Host() // used in setup: started, and failing, there
	}
	// On the suite's network too, so that Main must stop both before it.
	cache = s.Start(spec)
}

// use talks to both shared sandboxes over HTTP.
func use(t *testing.T) {
	t.Parallel()
	get(t, cache.For(t).Endpoint(port))
	get(t, web.For(t).Endpoint(port))
}

func get(t *testing.T, addr string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("GET %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "rightsize-test-server") {
		t.Fatalf("GET %s: %s %q", addr, resp.Status, body)
	}
}

func TestOne(t *testing.T) {
	if mode == "testneeds" {
		missing.For(t)
		t.Error("went on after the suite's sandbox it needs failed to start")
	}
	use(t)
}

func TestTwo(t *testing.T) {
	use(t)
	switch mode {
	case "panic":
		panic("mainfixture: a test panics")
	case "block":
		select {}
	case "exit3":
		os.Exit(3)
	}
}

func TestThree(t *testing.T) { use(t) }
