package docker

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// reach is where the ports a sandbox publishes are bound on the engine's
// host, and where this process reaches them.
type reach struct {
	// host is what Host returns: where this process dials published ports.
	host string
	// bind is the address ports are published on: loopback when this
	// process runs beside the engine (nothing else on the network can reach
	// them), the zero Addr (every interface) when it must come through a
	// gateway or over the network.
	bind netip.Addr
	// why says how the answer was reached, for a message.
	why string
}

var loopback = netip.MustParseAddr("127.0.0.1")

// containerMarkers are the files container engines put at the root of a
// container (Docker, Podman).
var containerMarkers = []string{"/.dockerenv", "/run/.containerenv"}

// resolveReach decides where ports go, the way testcontainers-go decides
// where they are reached, but from what this process can prove rather than
// from /.dockerenv alone (which some VMs carry):
//
//   - TESTCONTAINERS_HOST_OVERRIDE, when set, is the host; ports bind to
//     loopback only if it is a loopback address and the engine is local.
//   - An engine over TCP: its host name; ports bind on every interface of
//     the engine's host (nothing else can reach them from here).
//   - A local engine (unix socket, named pipe) that this process runs
//     beside — same network namespace as the engine's process, or no sign
//     of running in a container at all — is reached at 127.0.0.1, and
//     ports bind there only.
//   - A local engine seen from inside a container (the host's socket
//     mounted into it: CI docker executors, devcontainers): the engine's
//     loopback is not this process's. Ports bind on every interface and are
//     reached through the gateway of the engine's default bridge network,
//     as testcontainers-go reaches them.
func resolveReach(ctx context.Context, cli *client.Client, daemonHost string) reach {
	f := reachFacts{daemonHost: daemonHost}
	f.override, f.overrideSet = os.LookupEnv(EnvHostOverride)
	f.inContainer = inContainer()
	bridge := sync.OnceValue(func() bridgeFacts { return bridgeOf(ctx, cli) })
	f.gateway = func() string {
		if b := bridge(); b.gateway != "" {
			return b.gateway
		}
		return routeGateway()
	}
	f.onEngineHost = func() string {
		b := bridge()
		gw := b.gateway
		if gw == "" {
			gw = b.first
		}
		if gw == "" || !ownAddr(gw, b.iface) {
			return ""
		}
		return gw
	}
	f.beside = besideEngine
	return chooseReach(f)
}

// reachFacts is what chooseReach decides from; the functions are asked
// only when the answer needs them.
type reachFacts struct {
	daemonHost  string
	override    string
	overrideSet bool
	inContainer bool
	beside      func(socket string) (same, known bool)
	gateway     func() string
	// onEngineHost is the engine's bridge gateway when it is an address
	// of this process's own network interfaces, else "".
	onEngineHost func() string
}

func chooseReach(f reachFacts) reach {
	u, err := url.Parse(f.daemonHost)
	scheme, hostname := "", ""
	if err == nil {
		scheme, hostname = u.Scheme, u.Hostname()
	}
	local := localEngine(f.daemonHost)
	if f.overrideSet && f.override != "" {
		r := reach{host: f.override, why: EnvHostOverride + " is set"}
		if local && isLoopbackName(f.override) {
			r.bind = loopback
		}
		return r
	}
	if !local {
		if hostname == "" {
			hostname = "localhost"
		}
		return reach{host: hostname, why: "the engine is reached over the network at " + hostname}
	}
	if scheme != "unix" || !f.inContainer {
		return reach{host: "127.0.0.1", bind: loopback, why: "the engine runs on this machine"}
	}
	same, known := f.beside(u.Path)
	if known && same {
		return reach{host: "127.0.0.1", bind: loopback, why: "this process shares the engine's network namespace"}
	}
	if !known && f.onEngineHost != nil {
		// The engine's process is out of sight (another pid namespace:
		// a container run with the host's network), but the gateway of
		// its bridge is an address of this process's network: the
		// engine's host network is this one.
		if gw := f.onEngineHost(); gw != "" {
			return reach{host: "127.0.0.1", bind: loopback, why: "the gateway of the engine's bridge, " + gw + ", is an address of this process's network"}
		}
	}
	gw := f.gateway()
	if gw == "" {
		return reach{host: "localhost", why: "inside a container, and no gateway to the engine's host was found"}
	}
	return reach{host: gw, why: "inside a container: the engine's host is reached through the gateway " + gw}
}

// localEngine reports whether the engine daemonHost names runs on this
// machine: a unix socket, a named pipe, or TCP to a loopback name. An
// engine over SSH, or over TCP to any other host, is another machine's.
func localEngine(daemonHost string) bool {
	u, err := url.Parse(daemonHost)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "unix", "npipe":
		return true
	case "tcp", "http", "https":
		return isLoopbackName(u.Hostname())
	}
	return false
}

func isLoopbackName(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

func inContainer() bool {
	if runtime.GOOS != "linux" {
		return false
	}
	for _, p := range containerMarkers {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// bridgeFacts is what the engine says of its default bridge network.
type bridgeFacts struct {
	// gateway is its IPv4 gateway as the engine reports it: the engine
	// host's address as a container on that network sees it.
	gateway string
	// first is the subnet's first address, when the engine reports the
	// subnet without a gateway (a daemon that has not set its bridge up
	// since it was configured); the gateway unless --bip gave another.
	first string
	// iface is the bridge's interface on the engine's host ("docker0"),
	// when the engine says.
	iface string
}

// bridgeOf asks the engine about its default bridge network (Docker's
// "bridge", Podman's "podman").
func bridgeOf(ctx context.Context, cli *client.Client) bridgeFacts {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, name := range []string{"bridge", "podman"} {
		res, err := cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
		if err != nil {
			continue
		}
		b := bridgeFacts{iface: res.Network.Options["com.docker.network.bridge.name"]}
		for _, c := range res.Network.IPAM.Config {
			if c.Gateway.IsValid() && c.Gateway.Is4() {
				b.gateway = c.Gateway.String()
				return b
			}
		}
		for _, c := range res.Network.IPAM.Config {
			if c.Subnet.IsValid() && c.Subnet.Addr().Is4() && c.Subnet.Bits() < 31 {
				b.first = c.Subnet.Masked().Addr().Next().String()
				return b
			}
		}
		return b
	}
	return bridgeFacts{}
}

// ownAddr reports whether ip is an address of this process's network
// interface iface (of any of them when iface is ""): the engine host's
// bridge seen from here means this is the engine host's network.
func ownAddr(ip, iface string) bool {
	want, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	var addrs []net.Addr
	if iface != "" {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return false
		}
		addrs, err = ifi.Addrs()
		if err != nil {
			return false
		}
	} else if addrs, err = net.InterfaceAddrs(); err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if got, ok := netip.AddrFromSlice(n.IP); ok && got.Unmap() == want.Unmap() {
				return true
			}
		}
	}
	return false
}

// routeGateway is this machine's default route's gateway, from
// /proc/net/route (Linux), as testcontainers-go's fallback (`ip route`).
func routeGateway() string {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return ""
	}
	return parseRouteGateway(string(b))
}

func parseRouteGateway(table string) string {
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "00000000" {
			continue
		}
		v, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil {
			return ""
		}
		// Little-endian in the file.
		ip := net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
		return ip.String()
	}
	return ""
}
