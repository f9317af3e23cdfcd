package docker

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// OtherEngines returns the engines besides this one that a run of another
// member, which records no engine, may have used (backend.EngineFinder):
// DOCKER_HOST, the Docker contexts' (the Kotlin member follows both; Node
// and Rust a unix DOCKER_HOST), and the default socket. A unix socket that
// is not there is no engine, and is left out. unasked are engines known of
// that cannot be asked from here (TLS or ssh), with why.
func (d *Driver) OtherEngines() (hosts, unasked []string) {
	seen := map[string]bool{d.endpoint: true}
	add := func(host, why string) {
		if host == "" || seen[canonicalEndpoint(host)] {
			return
		}
		seen[canonicalEndpoint(host)] = true
		if why != "" {
			unasked = append(unasked, host+" ("+why+")")
			return
		}
		if u, err := url.Parse(host); err == nil && u.Scheme == "unix" {
			if _, err := os.Stat(u.Path); err != nil {
				return
			}
		}
		hosts = append(hosts, host)
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		add(h, askable(h, os.Getenv("DOCKER_TLS_VERIFY") != "" || os.Getenv("DOCKER_CERT_PATH") != ""))
	}
	for _, c := range contexts() {
		add(c.host, askable(c.host, c.tls))
	}
	add(defaultHost(), "")
	return hosts, unasked
}

// askable says why host cannot be asked from here, or "".
func askable(host string, tls bool) string {
	switch {
	case tls:
		return "it is reached over TLS, which a sweep does not set up"
	case strings.HasPrefix(host, "ssh://"):
		return "it is reached over ssh, which a sweep does not set up"
	}
	return ""
}

// contextEngine is one Docker context's engine.
type contextEngine struct {
	name, host string
	tls        bool
}

// contexts are the Docker contexts of the docker command line's
// configuration ($DOCKER_CONFIG, else ~/.docker), sorted by name: each
// context's metadata is contexts/meta/<digest>/meta.json, and its TLS
// material, if any, contexts/tls/<digest>/docker.
func contexts() []contextEngine {
	dir := configDir()
	if dir == "" {
		return nil
	}
	metas, _ := filepath.Glob(filepath.Join(dir, "contexts", "meta", "*", "meta.json"))
	var out []contextEngine
	for _, m := range metas {
		b, err := os.ReadFile(m)
		if err != nil || len(b) > 1<<20 {
			continue
		}
		var meta struct {
			Name      string
			Endpoints map[string]struct{ Host string }
		}
		if json.Unmarshal(b, &meta) != nil || meta.Endpoints["docker"].Host == "" {
			continue
		}
		digest := filepath.Base(filepath.Dir(m))
		_, err = os.Stat(filepath.Join(dir, "contexts", "tls", digest, "docker"))
		out = append(out, contextEngine{name: meta.Name, host: meta.Endpoints["docker"].Host, tls: err == nil})
	}
	slices.SortFunc(out, func(a, b contextEngine) int { return strings.Compare(a.name, b.name) })
	return out
}

// configDir is the docker command line's configuration folder:
// $DOCKER_CONFIG, else ~/.docker; "" when there is no home.
func configDir() string {
	if dir := os.Getenv("DOCKER_CONFIG"); dir != "" {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".docker")
}
