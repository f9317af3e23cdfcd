package docker

import (
	"fmt"

	"github.com/moby/moby/client"
)

// OpenHost returns a driver for the engine at host, in DOCKER_HOST syntax
// ("unix:///var/run/docker.sock", "tcp://10.0.0.5:2376"), without asking it
// anything: unlike Open it neither resolves an engine nor fails when none
// answers there, so that a sweep can be pointed at one given engine, and a
// test can see what the reaper does when the engine is unreachable.
func OpenHost(host string) (*Driver, error) {
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		return nil, fmt.Errorf("docker engine %s: %w", host, err)
	}
	d := newDriver(cli)
	d.chosen = true
	return d, nil
}
