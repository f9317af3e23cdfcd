package guardfixture_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/sandboxtest"
)

// Mode "origin": what each create through GuardAll's proxy is labelled as
// made by, in each place a create can come from. The fixture checks the
// labels itself, through the proxy (which passes inspects as they are),
// and says "origin=<case>" for each case that holds, "origin-bad=…" for
// one that does not; a failed test fails the binary.

const (
	labelTest  = "dev.rightsize.test"
	labelPlace = "dev.rightsize.test.place"
)

// originCreate creates and starts a sleeper through the proxy (it is the
// run's: Main removes it), and returns its labels and the place of the
// create's call, the innermost line of this package's code.
func originCreate(ctx context.Context) (map[string]string, string, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, "", err
	}
	defer cli.Close()
	place := here(1)
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: os.Getenv(envImage), Cmd: []string{"sleep", "3600"}, Labels: map[string]string{tagLabel: os.Getenv(envTag)}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return nil, "", err
	}
	in, err := cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, "", err
	}
	return in.Container.Config.Labels, place, nil
}

// here is file:line of its caller's line, plus next.
func here(next int) string {
	_, file, line, _ := runtime.Caller(1)
	return filepath.Base(file) + ":" + strconv.Itoa(line+next)
}

// checkOrigin says whether a create's labels name test at place ("" for
// any place).
func checkOrigin(labels map[string]string, test, place string) string {
	if labels[labelTest] != test || place != "" && labels[labelPlace] != place {
		return fmt.Sprintf("labelled %s=%q %s=%q, want %q at %q", labelTest, labels[labelTest], labelPlace, labels[labelPlace], test, place)
	}
	return ""
}

// report says whether a case held.
func report(t testing.TB, what, bad string) {
	if bad != "" {
		say("origin-bad", what+": "+bad)
		if t != nil {
			t.Errorf("%s: %s", what, bad)
		}
		return
	}
	say("origin", what)
}

func setupOrigin(s *sandboxtest.Suite) {
	if os.Getenv(envImage) == "" {
		s.Fatalf("%s is not set", envImage)
	}
	labels, place, err := originCreate(context.Background())
	if err != nil {
		s.Fatalf("create in Setup: %v", err)
	}
	report(nil, "setup", checkOrigin(labels, "Setup (TestMain)", place))
	s.Cleanup(func() {
		// After the tests, in TestMain: no test.
		labels, place, err := originCreate(context.Background())
		if err != nil {
			report(nil, "after the tests", err.Error())
			return
		}
		report(nil, "after the tests", checkOrigin(labels, "no test (TestMain)", place))
	})
}

func skipUnlessOrigin(t *testing.T) {
	if os.Getenv(envFixture) != "origin" {
		t.Skip(envFixture + " is not origin: this fixture is run by e2e")
	}
}

func TestOriginOfATest(t *testing.T) {
	skipUnlessOrigin(t)
	labels, place, err := originCreate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	report(t, "a test", checkOrigin(labels, "TestOriginOfATest", place))

	t.Run("eu", func(t *testing.T) {
		labels, place, err := originCreate(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// A subtest's name is on no stack.
		report(t, "a subtest", checkOrigin(labels, "a subtest of TestOriginOfATest", place))
	})

	// `docker run`, a child process: the test waits on it.
	if docker, err := exec.LookPath("docker"); err == nil {
		place := here(1)
		out, err := exec.Command(docker, "run", "-d", "--network", "none", "--label", tagLabel+"="+os.Getenv(envTag), os.Getenv(envImage), "sleep", "3600").CombinedOutput()
		if err != nil {
			t.Fatalf("docker run: %v\n%s", err, out)
		}
		cli, err := client.New(client.FromEnv)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		in, err := cli.ContainerInspect(t.Context(), strings.TrimSpace(string(out)), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		report(t, "docker run", checkOrigin(in.Container.Config.Labels, "TestOriginOfATest", place))
	}
}

// A goroutine the first test starts creates once the second test runs.
var (
	outlivedGo   = make(chan struct{})
	outlivedDone = make(chan struct{})
)

func TestOriginOutlivedA(t *testing.T) {
	skipUnlessOrigin(t)
	go func() {
		defer close(outlivedDone)
		<-outlivedGo
		labels, place, err := originCreate(context.Background())
		if err != nil {
			report(nil, "a goroutine that outlived its test", err.Error())
			return
		}
		report(nil, "a goroutine that outlived its test", checkOrigin(labels, "no test (a goroutine that outlived its test, started in TestOriginOutlivedA)", place))
	}()
}

func TestOriginOutlivedB(t *testing.T) {
	skipUnlessOrigin(t)
	close(outlivedGo)
	select {
	case <-outlivedDone:
	case <-time.After(2 * time.Minute):
		t.Fatal("the goroutine of TestOriginOutlivedA did not create within 2 minutes")
	}
}

// Two parallel tests: one waits on a client call of its own while the
// other creates; which of them made the create cannot be told.
var (
	parallelHeld = make(chan struct{})
	parallelFree = make(chan struct{})
)

func TestOriginParallelA(t *testing.T) {
	skipUnlessOrigin(t)
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(parallelHeld)
		<-parallelFree
	}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
}

func TestOriginParallelB(t *testing.T) {
	skipUnlessOrigin(t)
	t.Parallel()
	defer close(parallelFree)
	select {
	case <-parallelHeld:
	case <-time.After(2 * time.Minute):
		t.Fatal("TestOriginParallelA never waited")
	}
	labels, _, err := originCreate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	report(t, "parallel tests", checkOrigin(labels, "TestOriginParallelA or TestOriginParallelB (parallel: could not tell which)", ""))
}
