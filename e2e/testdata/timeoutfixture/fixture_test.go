package timeoutfixture_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/probe"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The environment e2e steers the fixture with.
const (
	envImage = "RZ_FIXTURE_IMAGE"
	// envInfo is a file the test appends key=value lines to: run, network,
	// sandbox (one line each), watchdog, blocked.
	envInfo       = "RZ_FIXTURE_INFO"
	envContainers = "RZ_FIXTURE_CONTAINERS" // 2 when unset
)

func TestStartsAndBlocks(t *testing.T) {
	img := os.Getenv(envImage)
	if img == "" {
		t.Skip(envImage + " is not set: this fixture is run by e2e")
	}
	f, err := os.OpenFile(os.Getenv(envInfo), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	say := func(k, v string) {
		if _, err := fmt.Fprintf(f, "%s=%s\n", k, v); err != nil {
			t.Fatal(err)
		}
	}
	n := 2
	if v := os.Getenv(envContainers); v != "" {
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := probe.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	say("run", sess.RunID())
	net := sandboxtest.NewNetwork(t)
	say("network", net.Name())
	for range n {
		g := sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{"/server"}, Networks: []*sandboxtest.Network{net}})
		say("sandbox", g.Name())
	}
	if wd := sess.Watchdog(); wd != nil {
		say("watchdog", strconv.Itoa(wd.PID))
	}
	say("blocked", "1")
	for {
		time.Sleep(time.Minute) // until the -timeout alarm or a signal
	}
}
