package sandboxtest_test

import (
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// TestNetworkTwoMembers: two sandboxes on a network reach each other's
// /server by alias.
func TestNetworkTwoMembers(t *testing.T) {
	t.Parallel()
	img := testimage.Busybox(t)
	r := newRig(t)
	in := r.session()
	var netName string
	var members []string
	t.Run("talk", func(t *testing.T) {
		r := newRig(t)
		n := sandboxtest.NewNetwork(t)
		netName = n.Name()
		if !regexp.MustCompile(`^rz-net-[0-9a-f]{8}$`).MatchString(netName) {
			t.Errorf("network name %q, want rz-net-<8 hex>", netName)
		}
		if l := r.lines(in.CacheDir, in.RunID); !slices.Contains(l.networks, netName) {
			t.Errorf("%s is not a line of %s.networks while it exists (lines %q)", netName, in.RunID, l.networks)
		}
		ok, labels, _ := r.networkExists(netName)
		if !ok {
			t.Fatalf("network %s does not exist", netName)
		}
		for _, k := range []string{docker.LabelRunID, docker.LabelRunIDAlt} {
			if labels[k] != in.RunID {
				t.Errorf("network label %s = %q, want %q", k, labels[k], in.RunID)
			}
		}

		// Each serves on 8080; each fetches the other's page by its alias.
		member := func(alias string) *sandboxtest.Guard {
			return sandboxtest.Start(t, sandboxtest.Spec{
				Image:      img,
				Cmd:        []string{testimage.ServerPath, "8080"},
				Networks:   []*sandboxtest.Network{n},
				Aliases:    []string{alias},
				WaitingFor: wait.ForLog("ready").WithPollInterval(10 * time.Millisecond),
			})
		}
		a, b := member("alpha"), member("beta")
		members = []string{a.Name(), b.Name()}
		for _, c := range []struct {
			from *sandboxtest.Guard
			peer string
		}{{a, "beta"}, {b, "alpha"}} {
			res, err := c.from.Exec(t.Context(), []string{"wget", "-qO-", "http://" + c.peer + ":8080/"})
			if err != nil {
				t.Fatalf("exec in %s: %v", c.from.Name(), err)
			}
			if res.ExitCode != 0 || res.Stdout != serverBody {
				t.Errorf("%s could not reach %s by alias: %s", c.from.Name(), c.peer, res)
			}
		}
		if _, _, got := r.networkExists(netName); !slices.Equal(got, slices.Sorted(slices.Values(members))) {
			t.Errorf("network %s has members %q, want %q", netName, got, members)
		}
	})
	if netName == "" {
		t.FailNow()
	}
	if ok, _, _ := r.networkExists(netName); ok {
		t.Errorf("network %s outlived its test", netName)
	}
	l := r.lines(in.CacheDir, in.RunID)
	if slices.Contains(l.networks, netName) {
		t.Errorf("%s is still a line of %s.networks after its test", netName, in.RunID)
	}
	for _, m := range members {
		if _, ok := r.inspect(m); ok {
			t.Errorf("member %s outlived its test", m)
		}
		if slices.Contains(l.sandboxes, m) {
			t.Errorf("member %s is still a line after its test", m)
		}
	}
}
