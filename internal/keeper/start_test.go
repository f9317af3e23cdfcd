package keeper

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// Start refuses, before asking the engine anything, a run id that cannot
// name a keeper and a lease timeout out of range.
func TestStartRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		run     string
		timeout time.Duration
		reason  string
	}{
		{"", 0, "no run id"},
		{"../x", 0, "a path"},
		{"-x", 0, "an option"},
		{"a b", 0, "a space, which no container name may hold"},
		{"x/y", 0, "a slash"},
		{"abcd1234", 100 * time.Millisecond, "a lease timeout shorter than 1 s"},
		{"abcd1234", 2 * time.Hour, "a lease timeout longer than 1 h"},
	} {
		// A nil client: any call to the engine would panic.
		k, err := Start(context.Background(), nil, tc.run, Options{LeaseTimeout: tc.timeout, Image: "x", Socket: "/x"})
		if err == nil || k != nil {
			t.Errorf("Start(%q, %s) = %v, %v; want an error for %s", tc.run, tc.timeout, k, err, tc.reason)
		}
	}
}

// A second keeper of a run is refused, and the first goes on.
func TestStartTwice(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	k := r.start(run, Options{})
	if want := max(FirstHoldWait, k.LeaseTimeout); k.FirstHold != want {
		t.Errorf("a keeper of a %s lease waits %s for its first holder, want %s", k.LeaseTimeout, k.FirstHold, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if k2, err := Start(ctx, r.cli, run, Options{}); !errors.Is(err, ErrExists) {
		if k2 != nil {
			k2.Remove(ctx)
		}
		t.Fatalf("a second Start of run %s: %v, want ErrExists", run, err)
	}
	if _, err := k.Hold(ctx); err != nil {
		t.Errorf("the first keeper after a second Start: %v", err)
	}
}

// Where the socket is not the engine's, Start fails with ErrRefused, says
// why, and leaves no keeper behind.
func TestStartRefused(t *testing.T) {
	r := newRig(t)
	// A socket that takes each connection and closes it at once.
	dir := t.TempDir()
	deaf := filepath.Join(dir, "deaf.sock")
	ln, err := net.Listen("unix", deaf)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// Docker refuses to mount what is not there; Podman makes a folder
	// there, which the keeper finds.
	missing := "does not exist"
	if r.podman() {
		missing = "is a folder"
	}
	cases := []struct{ name, socket, want string }{
		{"no such socket", filepath.Join(dir, "none.sock"), missing},
		{"a socket that is no engine's", deaf, "does not answer"},
	}
	if other := otherEngineSocket(t, r); other != "" {
		cases = append(cases, struct{ name, socket, want string }{"another engine's socket", other, "another engine"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := newRunID(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			k, err := Start(ctx, r.cli, run, Options{Socket: tc.socket})
			if k != nil {
				k.Remove(ctx)
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start with the socket %s: %v; want ErrRefused saying %q", tc.socket, err, tc.want)
			}
			t.Logf("%v", err)
			if r.exists(NamePrefix+run, false) {
				t.Errorf("a refused keeper %s was left on the engine", NamePrefix+run)
			}
		})
	}
}

// otherEngineSocket returns the socket of an engine on this host other
// than the test's (Docker's default socket, or Podman's as
// scripts/podman.sh starts it), or "" when none answers.
func otherEngineSocket(t *testing.T, r *rig) string {
	t.Helper()
	ours := ""
	if u, err := url.Parse(r.cli.DaemonHost()); err == nil && u.Scheme == "unix" {
		ours, _ = filepath.EvalSymlinks(u.Path)
	}
	for _, p := range []string{"/var/run/docker.sock", "/run/rightsize-podman/podman.sock"} {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || real == ours {
			continue
		}
		if fi, err := os.Stat(real); err != nil || fi.Mode()&os.ModeSocket == 0 {
			continue
		}
		c, err := client.New(client.WithHost("unix://" + real))
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = c.Ping(ctx, client.PingOptions{})
		cancel()
		c.Close()
		if err == nil {
			return real
		}
	}
	t.Log("no other engine answers on this host: the case of another engine's socket is left out")
	return ""
}

// The keeper has no network at all: it talks to the engine through the
// mounted socket alone. NetworkMode none is what Podman reads; Docker
// also needs NetworkDisabled, without which it sets up a network
// namespace for the container and runs its own binary again as the
// container's start hook (the larger part of a keeper's start).
func TestKeeperHasNoNetwork(t *testing.T) {
	r := newRig(t)
	k := r.start(newRunID(t), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.cli.ContainerInspect(ctx, k.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Container
	if c.HostConfig == nil || c.HostConfig.NetworkMode != "none" {
		t.Errorf("the keeper's host config is %+v, want network mode none", c.HostConfig)
	}
	if r.podman() {
		return // Podman 4.3 neither keeps nor reports NetworkDisabled
	}
	if c.Config == nil || !c.Config.NetworkDisabled {
		t.Error("the keeper's container has its network enabled (Config.NetworkDisabled is not set)")
	}
}
