package sandboxtest

import (
	"context"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/origin"
)

// nextLine is file:line of the line after its caller's.
func nextLine() string {
	_, file, line, _ := runtime.Caller(1)
	return filepath.Base(file) + ":" + strconv.Itoa(line+1)
}

// TestOriginOfSuite: a suite's sandbox and network name the Setup, at the
// place of their Start and NewNetwork in it, though their first use, in
// a test, is what starts them.
func TestOriginOfSuite(t *testing.T) {
	s, d := engineSession(t)
	captureStderr(t)
	var (
		web          *Guard
		net          *Network
		webAt, netAt string
	)
	setup := func(su *Suite) {
		netAt = nextLine()
		net = su.NewNetwork()
		spec := serverSpec(t)
		spec.Networks = []*Network{net}
		webAt = nextLine()
		web = su.Start(spec)
	}
	tests := func() int {
		t.Run("first use", func(t *testing.T) {
			name := web.For(t).Name()
			ctx := context.Background()
			c, err := d.Client().ContainerInspect(ctx, name, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n, err := d.Client().NetworkInspect(ctx, net.Name(), client.NetworkInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			origins := ledger.ReadOrigins(s.CacheDir(), s.RunID())
			for _, c := range []struct {
				kind   ledger.Kind
				name   string
				labels map[string]string
				want   origin.Origin
			}{
				{ledger.SandboxKind, name, c.Container.Config.Labels, origin.Setup("TestMain", webAt)},
				{ledger.NetworkKind, net.Name(), n.Network.Labels, origin.Setup("TestMain", netAt)},
			} {
				if got := origin.FromLabels(c.labels); got != c.want {
					t.Errorf("the suite's %s %s is labelled as made by %+v, want %+v", c.kind, c.name, got, c.want)
				}
				if got := origins.Of(c.kind, c.name); got != c.want {
					t.Errorf("the run's origins say the suite's %s %s was made by %+v, want %+v", c.kind, c.name, got, c.want)
				}
			}
		})
		return 0
	}
	if code := runMain(runFunc(tests), []func(*Suite){setup}); code != 0 {
		t.Errorf("runMain = %d", code)
	}
}
