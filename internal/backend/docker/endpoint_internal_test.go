package docker

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

func TestCanonicalEndpoint(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.sock")
	if err := os.WriteFile(real, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ host, want, reason string }{
		{"unix://" + link, "unix://" + real, "two paths to one socket are one engine"},
		{"unix:///nonexistent/docker.sock", "unix:///nonexistent/docker.sock", "a socket that is not there keeps its path"},
		{"tcp://127.0.0.1:2375", "tcp://127.0.0.1:2375", "a TCP endpoint is as given"},
		{"npipe:////./pipe/docker_engine", "npipe:////./pipe/docker_engine", "a named pipe is as given"},
	} {
		if got := canonicalEndpoint(tt.host); got != tt.want {
			t.Errorf("canonicalEndpoint(%q) = %q; want %q (%s)", tt.host, got, tt.want, tt.reason)
		}
	}
}

// Where ports are bound and reached, in every layout tests run in: the
// answer testcontainers-go gives, but from what the process can prove
// rather than from /.dockerenv alone.
func TestChooseReach(t *testing.T) {
	same := func(string) (bool, bool) { return true, true }
	other := func(string) (bool, bool) { return false, true }
	unknown := func(string) (bool, bool) { return false, false }
	gw := func() string { return "172.17.0.1" }
	none := func() string { return "" }
	for _, tt := range []struct {
		name         string
		f            reachFacts
		host         string
		loopbackOnly bool
		reason       string
	}{
		{"laptop", reachFacts{daemonHost: "unix:///var/run/docker.sock", beside: unknown, gateway: gw}, "127.0.0.1", true,
			"no sign of a container: loopback, where nothing else can reach the ports"},
		{"VM with /.dockerenv", reachFacts{daemonHost: "unix:///var/run/docker.sock", inContainer: true, beside: same, gateway: gw}, "127.0.0.1", true,
			"a marker file, but the engine's process shares this one's network: loopback works"},
		{"socket mounted into a container", reachFacts{daemonHost: "unix:///var/run/docker.sock", inContainer: true, beside: unknown, gateway: gw}, "172.17.0.1", false,
			"the engine's loopback is not ours: every interface, reached through the bridge's gateway, as testcontainers-go does"},
		{"container, other network namespace", reachFacts{daemonHost: "unix:///var/run/docker.sock", inContainer: true, beside: other, gateway: gw}, "172.17.0.1", false,
			"the same, when the engine's process is visible but elsewhere"},
		{"container, no gateway", reachFacts{daemonHost: "unix:///var/run/docker.sock", inContainer: true, beside: unknown, gateway: none}, "localhost", false,
			"testcontainers-go's last resort"},
		{"dind over tcp", reachFacts{daemonHost: "tcp://docker:2375", inContainer: true, beside: unknown, gateway: gw}, "docker", false,
			"GitLab's docker:dind service: the engine's host name"},
		{"local tcp", reachFacts{daemonHost: "tcp://127.0.0.1:2375", beside: unknown, gateway: gw}, "127.0.0.1", true,
			"an engine on this machine's loopback"},
		{"override", reachFacts{daemonHost: "unix:///var/run/docker.sock", override: "host.example", overrideSet: true, beside: same, gateway: gw}, "host.example", false,
			"TESTCONTAINERS_HOST_OVERRIDE wins, and a name other than loopback needs the ports on every interface"},
		{"override localhost", reachFacts{daemonHost: "unix:///var/run/docker.sock", override: "localhost", overrideSet: true, beside: same, gateway: gw}, "localhost", true,
			"a loopback override keeps ports on loopback"},
		{"host network, engine out of sight", reachFacts{daemonHost: "unix:///var/run/docker.sock", inContainer: true, beside: unknown, gateway: gw, onEngineHost: gw}, "127.0.0.1", true,
			"a container on the host's network (its own pid namespace hides the engine): the bridge's gateway is one of our addresses, so the engine's loopback is ours"},
		{"other namespace, gateway ours", reachFacts{daemonHost: "unix:///var/run/docker.sock", inContainer: true, beside: other, gateway: gw, onEngineHost: gw}, "172.17.0.1", false,
			"when the engine's process is seen in another network namespace, that answer stands"},
		{"empty override", reachFacts{daemonHost: "unix:///var/run/docker.sock", override: "", overrideSet: true, beside: unknown, gateway: gw}, "127.0.0.1", true,
			"an empty override is no override"},
	} {
		r := chooseReach(tt.f)
		if r.host != tt.host || (r.bind == loopback) != tt.loopbackOnly || (!tt.loopbackOnly && r.bind.IsValid()) {
			t.Errorf("%s: host %q, bind %v (%s); want %q, loopback only %v (%s)", tt.name, r.host, r.bind, r.why, tt.host, tt.loopbackOnly, tt.reason)
		}
	}
}

func TestParseRouteGateway(t *testing.T) {
	table := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n" +
		"eth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
	if got := parseRouteGateway(table); got != "172.17.0.1" {
		t.Errorf("parseRouteGateway = %q, want 172.17.0.1", got)
	}
	if got := parseRouteGateway("Iface\n"); got != "" {
		t.Errorf("no default route: %q", got)
	}
}

// The facts the in-container layouts are decided from, asked of the
// engine this test runs beside (the project's CI and a laptop): its
// bridge's gateway is an address of its bridge's interface here, and
// loopback is ours too.
func TestOwnAddrAndBridgeGateway(t *testing.T) {
	if !ownAddr("127.0.0.1", "") {
		t.Error("ownAddr(127.0.0.1) = false: loopback is an address of every machine")
	}
	if ownAddr("192.0.2.254", "") || ownAddr("not an address", "") || ownAddr("127.0.0.1", "no-such-if0") {
		t.Error("ownAddr answered true for an address no interface here has")
	}
	if testing.Short() {
		t.Skip("the rest asks the engine (-short)")
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Skip(err)
	}
	defer cli.Close()
	u, err := url.Parse(cli.DaemonHost())
	if err != nil || u.Scheme != "unix" {
		t.Skipf("the engine (%s) is not on this machine's socket", cli.DaemonHost())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		t.Skipf("no engine: %v", err)
	}
	if same, known := besideEngine(u.Path); !known || !same {
		t.Skipf("not proven to share the engine's network (beside: %v, known: %v): a VM, rootless Docker or a container", same, known)
	}
	if (&Driver{cli: cli}).isPodman() {
		t.Skip("Podman makes its bridge's interface only while a container runs on it")
	}
	if _, err := cli.NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{}); err != nil {
		t.Skipf("no default bridge: %v", err)
	}
	b := bridgeOf(ctx, cli)
	gw := b.gateway
	if gw == "" {
		gw = b.first
	}
	if gw == "" {
		t.Fatal("the engine's default bridge has neither a gateway nor a subnet")
	}
	if !ownAddr(gw, b.iface) {
		t.Errorf("the default bridge's gateway %s is not an address of its interface %q here, beside the engine", gw, b.iface)
	}
	t.Logf("bridge %+v", b)
}
