package keeper

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
)

const (
	// EnvSocketOverride names the socket's path on the engine's host
	// (testcontainers-go's variable for Ryuk's mount: a user who set it
	// for Ryuk needs nothing more for the keeper).
	EnvSocketOverride = "TESTCONTAINERS_DOCKER_SOCKET_OVERRIDE"
	// DefaultSocket is the engine's socket where nothing says otherwise.
	DefaultSocket = "/var/run/docker.sock"
	// socketInside is where the keeper finds the socket.
	socketInside = "/var/run/docker.sock"
)

// SocketPath returns the path, on the engine's host, of the engine's unix
// socket, which a keeper mounts: EnvSocketOverride when set; the unix
// socket this process reaches the engine through, when the engine's
// process sees the same mounts as this one (the path is then the engine
// host's own);
// for Podman, the socket its service says it listens on (when it says it
// exists); for an engine reached through a unix socket on Linux, that
// socket; otherwise DefaultSocket (an engine over TCP or SSH, or in the VM
// of Docker Desktop or colima). A wrong answer is not silent: the engine
// refuses to mount a path that does not exist, and the keeper says so when
// what it finds there is not its own engine.
func SocketPath(ctx context.Context, cli *client.Client) string {
	if p := os.Getenv(EnvSocketOverride); p != "" {
		return strings.TrimPrefix(p, "unix://")
	}
	u, err := url.Parse(cli.DaemonHost())
	unixPath := ""
	if err == nil && u.Scheme == "unix" && runtime.GOOS == "linux" && u.Path != "" {
		unixPath = u.Path
	}
	// Asking Podman costs it about 0.3 s: not where the answer is known.
	if unixPath != "" {
		if same, known := docker.SameMounts(unixPath); same && known {
			return unixPath
		}
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	// Docker answers Podman's own API with a quick 404.
	if p, ok := podmanSocket(ctx, cli); ok {
		return p
	}
	if unixPath != "" {
		return unixPath
	}
	return DefaultSocket
}

// podmanSocket asks Podman's own API where its service listens, on its
// host; Podman says whether that socket exists.
func podmanSocket(ctx context.Context, cli *client.Client) (string, bool) {
	dial := cli.Dialer()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://podman/v4.0.0/libpod/info", nil)
	if err != nil {
		return "", false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var info struct {
		Host struct {
			RemoteSocket struct {
				Path   string `json:"path"`
				Exists bool   `json:"exists"`
			} `json:"remoteSocket"`
		} `json:"host"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info) != nil {
		return "", false
	}
	rs := info.Host.RemoteSocket
	p := strings.TrimPrefix(rs.Path, "unix://")
	if !rs.Exists || !strings.HasPrefix(p, "/") {
		return "", false
	}
	return p, true
}

// callTimeout bounds each call this package makes to the engine.
const callTimeout = 30 * time.Second
