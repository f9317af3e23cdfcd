package docker

import (
	"os"
	"path/filepath"
	"testing"
)

// What a run records is the socket with its links resolved; what a person
// reads is the default socket as testcontainers-go names it.
func TestSpokenEndpoint(t *testing.T) {
	def := defaultHost()
	resolved := canonicalEndpoint(def)
	if r, err := filepath.EvalSymlinks("/var/run"); err != nil || r == "/var/run" {
		t.Logf("/var/run is not a link here (%v): the resolved form is the default's own", err)
	}
	for _, tc := range []struct{ in, want, reason string }{
		{resolved, def, "the default socket, as resolved (unix:///run/docker.sock on Debian)"},
		{def, def, "the default as spelled"},
		{"tcp://10.0.0.5:2376", "tcp://10.0.0.5:2376", "another engine, as recorded"},
		{"unix://" + filepath.Join(os.TempDir(), "podman.sock"), "unix://" + filepath.Join(os.TempDir(), "podman.sock"), "another socket"},
		{"", "", "none"},
	} {
		if got := SpokenEndpoint(tc.in); got != tc.want {
			t.Errorf("SpokenEndpoint(%q) = %q, want %q: %s", tc.in, got, tc.want, tc.reason)
		}
	}
}
