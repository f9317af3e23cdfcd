package docker

import "testing"

// Which engines are this machine's: the keeper is chosen by itself for
// the others.
func TestLocalEngine(t *testing.T) {
	for host, want := range map[string]bool{
		"unix:///var/run/docker.sock":       true,
		"npipe:////./pipe/docker_engine":    true,
		"tcp://127.0.0.1:2375":              true,
		"tcp://localhost:2375":              true,
		"tcp://[::1]:2375":                  true,
		"http://127.0.0.2:2375":             true,
		"tcp://10.1.2.3:2376":               false,
		"tcp://docker.example:2376":         false,
		"https://build-host:2376":           false,
		"ssh://ci@build-host":               false,
		"tcp://localhost.evil.example:2375": false,
		"not a url\x7f":                     false,
	} {
		if got := localEngine(host); got != want {
			t.Errorf("localEngine(%q) = %v, want %v", host, got, want)
		}
		d := &Driver{daemonHost: host}
		if d.Remote() == want {
			t.Errorf("Remote() of %q = %v, want %v", host, d.Remote(), !want)
		}
	}
}
