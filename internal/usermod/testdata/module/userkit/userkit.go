// Package userkit is what a user's tests share: a test that starts a
// network and sandboxes as the README says, tells the harness what it
// started, then blocks until it is killed, or passes; and one that holds a
// sandbox across what the harness does, then starts another.
package userkit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The environment the harness steers the test with.
const (
	EnvImage     = "USER_IMAGE"     // the sandboxes' image; the test skips without one
	EnvCmd       = "USER_CMD"       // their command, words split on spaces ("/server" when unset)
	EnvSandboxes = "USER_SANDBOXES" // how many (2 when unset)
	EnvNetwork   = "USER_NETWORK"   // "0": no network
	EnvInfo      = "USER_INFO"      // a file the test appends key=value lines to
	EnvPass      = "USER_PASS"      // "1": pass once stdin closes
	EnvVolume    = "USER_VOLUME"    // "1": the sandboxes mount a named volume at /data
	EnvBuild     = "USER_BUILD"     // "1": the sandboxes run an image the test builds FROM the image
)

// Hold starts what the environment asks for, says so in the info file
// (network=, volume=, image=, sandbox= lines, then blocked=1), then blocks until the
// process is killed or `go test -timeout` fires; with USER_PASS=1, until
// its stdin closes, and then it passes. It is a helper (t.Helper): what
// it starts is its caller's, at its call.
func Hold(t *testing.T) {
	t.Helper()
	say, spec := begin(t)
	n := 2
	if v := os.Getenv(EnvSandboxes); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	if os.Getenv(EnvNetwork) != "0" {
		net := sandboxtest.NewNetwork(t)
		say("network", net.Name())
		spec.Networks = []*sandboxtest.Network{net}
	}
	if os.Getenv(EnvVolume) == "1" {
		vol := sandboxtest.NewVolume(t)
		say("volume", vol.Name())
		spec.Mounts = []sandboxtest.Mount{{Volume: vol, Path: "/data"}}
	}
	if os.Getenv(EnvBuild) == "1" {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+spec.Image+"\nLABEL user.built=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		img := sandboxtest.NewImage(t, sandboxtest.Build{Dir: dir})
		say("image", img.Name())
		spec.Image = img.Name()
	}
	for range n {
		g := sandboxtest.Start(t, spec)
		say("sandbox", g.Name())
	}
	say("blocked", "1")
	if os.Getenv(EnvPass) == "1" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	for {
		time.Sleep(time.Minute) // until SIGKILL, a signal or the -timeout alarm
	}
}

// HoldAcross starts a sandbox and says so (sandbox=), then waits for a
// line on its stdin while the harness does what it tests (deletes the
// run's claim, say); then it starts another, says so and blocked=1, and
// ends once its stdin closes, stopping both: what their stops say is the
// harness's to read in the output.
func HoldAcross(t *testing.T) {
	say, spec := begin(t)
	first := sandboxtest.Start(t, spec)
	say("sandbox", first.Name())
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		t.Fatalf("the harness's go-ahead on stdin: %v", err)
	}
	second := sandboxtest.Start(t, spec)
	say("sandbox", second.Name())
	say("blocked", "1")
	_, _ = io.Copy(io.Discard, in)
}

// begin skips t without an image, and returns what writes to the info file
// and the sandboxes' spec.
func begin(t *testing.T) (say func(k, v string), spec sandboxtest.Spec) {
	t.Helper()
	img := os.Getenv(EnvImage)
	if img == "" {
		t.Skip(EnvImage + " is not set: this test is run by the repository's harness")
	}
	say = Info(t)
	cmd := []string{"/server"}
	if v := os.Getenv(EnvCmd); v != "" {
		cmd = strings.Fields(v)
	}
	return say, sandboxtest.Spec{Image: img, Cmd: cmd}
}

// Info returns what appends key=value lines to the info file (EnvInfo),
// which is closed when t ends.
func Info(t *testing.T) func(k, v string) {
	t.Helper()
	f, err := os.OpenFile(os.Getenv(EnvInfo), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return func(k, v string) {
		if _, err := fmt.Fprintf(f, "%s=%s\n", k, v); err != nil {
			t.Fatal(err)
		}
	}
}
