package incontainer_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/probe"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// envImage is the image its sandboxes run: the busybox test image, whose
// /server answers HTTP on 8080.
const envImage = "RZ_FIXTURE_IMAGE"

// say prints a line the test outside reads from the container's log.
func say(k, v string) { fmt.Printf("fixture: %s=%s\n", k, v) }

// TestInContainer starts a sandbox with Start and one with a Track(t)ed
// testcontainers-go request, reaches each through the endpoint it was
// given, says what it found, and blocks until it is killed.
func TestInContainer(t *testing.T) {
	img := os.Getenv(envImage)
	if img == "" {
		t.Skip(envImage + " is not set: this fixture is run by e2e")
	}
	sess, err := probe.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	say("run", sess.RunID())
	g := sandboxtest.Start(t, sandboxtest.Spec{
		Image: img, Cmd: []string{"/server", "8080"}, Ports: []string{"8080/tcp"}, WaitingFor: wait.ForLog("ready"),
	})
	say("guard", g.Endpoint("8080/tcp"))
	say("guard.get", get(g.Endpoint("8080/tcp")))

	ctx := context.Background()
	ctr, err := testcontainers.Run(ctx, img,
		testcontainers.WithCmd("/server", "8080"),
		testcontainers.WithExposedPorts("8080/tcp"),
		testcontainers.WithWaitStrategy(wait.ForLog("ready")),
		sandboxtest.Track(t))
	if err != nil {
		t.Fatal(err)
	}
	ep, err := ctr.PortEndpoint(ctx, "8080/tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	say("track", ep)
	say("track.get", get(ep))
	if wd := sess.Watchdog(); wd != nil {
		say("watchdog", wd.Kind)
	}
	say("ready", "1")
	select {}
}

// get fetches http://addr/ and says "ok", or why not.
func get(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err != nil || h == "" {
		return "no host in " + addr
	}
	c := http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return strings.ReplaceAll(err.Error(), "\n", " ")
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(string(body), "rightsize-test-server") {
		return fmt.Sprintf("%s %q", resp.Status, body)
	}
	return "ok"
}
