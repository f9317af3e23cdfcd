package docker

import (
	"os"
	"path/filepath"
	"testing"
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
	tests := []struct {
		host   string
		want   string
		local  bool
		reason string
	}{
		{"unix://" + link, "unix://" + real, true, "two paths to one socket are one engine"},
		{"unix:///nonexistent/docker.sock", "unix:///nonexistent/docker.sock", true, "a socket that is not there keeps its path"},
		{"tcp://127.0.0.1:2375", "tcp://127.0.0.1:2375", true, "the loopback address is this machine"},
		{"tcp://localhost:2375", "tcp://localhost:2375", true, "localhost is this machine"},
		{"tcp://[::1]:2375", "tcp://[::1]:2375", true, "the IPv6 loopback is this machine"},
		{"npipe:////./pipe/docker_engine", "npipe:////./pipe/docker_engine", true, "a named pipe is local"},
		{"tcp://10.1.2.3:2376", "tcp://10.1.2.3:2376", false, "another address is another machine"},
		{"ssh://me@build-host", "ssh://me@build-host", false, "an engine over ssh is another machine"},
	}
	for _, tt := range tests {
		got, local := canonicalEndpoint(tt.host)
		if got != tt.want || local != tt.local {
			t.Errorf("canonicalEndpoint(%q) = %q, %v; want %q, %v (%s)", tt.host, got, local, tt.want, tt.local, tt.reason)
		}
	}
}

func TestPublishedHost(t *testing.T) {
	tests := []struct {
		override   string
		daemonHost string
		local      bool
		want       string
		reason     string
	}{
		{"", "unix:///var/run/docker.sock", true, "127.0.0.1", "a local engine publishes on the loopback address only"},
		{"", "tcp://localhost:2375", true, "127.0.0.1", "even when reached by name: ports are bound to 127.0.0.1, not ::1"},
		{"", "tcp://10.1.2.3:2376", false, "10.1.2.3", "a remote engine publishes on its own address"},
		{"", "ssh://me@build-host", false, "build-host", "the host name of the engine's address"},
		{"gw.example", "unix:///var/run/docker.sock", true, "gw.example", "TESTCONTAINERS_HOST_OVERRIDE wins"},
		{"gw.example", "tcp://10.1.2.3:2376", false, "gw.example", "TESTCONTAINERS_HOST_OVERRIDE wins"},
	}
	for _, tt := range tests {
		t.Setenv(EnvHostOverride, tt.override)
		if got := publishedHost(tt.daemonHost, tt.local); got != tt.want {
			t.Errorf("override %q, engine %s: publishedHost = %q, want %q (%s)", tt.override, tt.daemonHost, got, tt.want, tt.reason)
		}
	}
}
