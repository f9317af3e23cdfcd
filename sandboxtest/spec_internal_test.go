package sandboxtest

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/testimage"

	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
)

// A spec reuse could not honour is refused before anything starts, and the
// same way whether RIGHTSIZE_REUSE is on or off: a suite that passes in CI
// passes on a laptop with reuse on.
func TestReuseRefusalsWithReuseOnAndOff(t *testing.T) {
	net := &Network{}
	vol := &Volume{obj: runObject{kind: names.VolumeKind}}
	custom := []testcontainers.ContainerCustomizer{testcontainers.WithEnv(map[string]string{"A": "1"})}
	refused := []struct {
		name string
		spec Spec
		want string
	}{
		{"networks", Spec{Image: "img", Reuse: true, Networks: []*Network{net}}, "Spec.Reuse with Spec.Networks"},
		{"volumes", Spec{Image: "img", Reuse: true, Mounts: []Mount{{Volume: vol, Path: "/data"}}}, "Spec.Reuse with Spec.Mounts"},
		{"a mount without a volume", Spec{Image: "img", Mounts: []Mount{{Path: "/data"}}}, `the mount at "/data" has no Volume`},
		{"a volume NewVolume did not make", Spec{Image: "img", Mounts: []Mount{{Volume: &Volume{}, Path: "/data"}}}, `the Volume mounted at "/data" was not made by NewVolume`},
		{"a relative mount path", Spec{Image: "img", Mounts: []Mount{{Volume: vol, Path: "data"}}}, `the mount path "data" is not absolute`},
		{"customize without a key", Spec{Image: "img", Reuse: true, Customize: custom}, "needs Spec.ReuseKey"},
		{"labels without a key", Spec{Image: "img", Reuse: true, Labels: map[string]string{"team": "a"}}, "needs Spec.ReuseKey"},
		{"no image", Spec{Reuse: true}, "Spec.Image is empty"},
		{"a negative time-to-live", Spec{Image: "img", Reuse: true, ReuseTTL: -time.Second}, "Spec.ReuseTTL is -1s"},
		{"a time-to-live without Reuse", Spec{Image: "img", ReuseTTL: time.Hour}, "Spec.ReuseTTL without Spec.Reuse"},
	}
	for _, reuse := range []string{"", "true"} {
		t.Run("RIGHTSIZE_REUSE="+reuse, func(t *testing.T) {
			t.Setenv("RIGHTSIZE_REUSE", reuse)
			for _, tc := range refused {
				// start checks the spec before it opens a session: no
				// engine is asked, with reuse on or off.
				g := &Guard{spec: tc.spec}
				_, err := g.start(context.Background())
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: start = %v, want an error saying %q", tc.name, err, tc.want)
				}
				if g.s != nil {
					t.Errorf("%s: a session was opened before the spec was refused", tc.name)
				}
			}
		})
	}
	for _, ok := range []Spec{
		{Image: "img", Reuse: true, Customize: custom, ReuseKey: "v1"},
		{Image: "img", Reuse: true, Labels: map[string]string{"team": "a"}, ReuseKey: "v1"},
		{Image: "img", Networks: []*Network{net}},
		{Image: "img", Mounts: []Mount{{Volume: vol, Path: "/data", ReadOnly: true}}},
		{Image: "img", Reuse: true, ReuseTTL: time.Hour},
	} {
		if err := ok.check(); err != nil {
			t.Errorf("check(%+v) = %v, want it accepted", ok, err)
		}
	}
}

// Two specs the family's hash cannot tell apart but rightsize-go can (here
// their ReuseKey) never share a keep-alive sandbox silently: the second is
// refused, saying what differs and what to do.
func TestReuseExtraMismatch(t *testing.T) {
	testimage.Engine(t)
	t.Setenv(EnvReuse, "1")
	t.Setenv("TMPDIR", t.TempDir()) // the keep-alive use locks (ledger.UseDir): the test's own
	spec := Spec{
		Image:    testimage.Busybox(t),
		Cmd:      []string{"sleep", "3600"},
		Env:      map[string]string{"RZ_TEST_NONCE": rand.Text()},
		Labels:   map[string]string{"team": "a"},
		ReuseKey: "one",
		Reuse:    true,
	}
	first, _, err := start(tbOwner{t}, spec, origin.Of(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli, err := client.New(client.FromEnv)
		if err != nil {
			t.Error(err)
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := cli.ContainerRemove(ctx, first.name, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove keep-alive %s: %v", first.name, err)
		}
	})
	other := spec
	other.ReuseKey = "two"
	second, _, err := start(tbOwner{t}, other, origin.Of(t))
	if err == nil || !strings.Contains(err.Error(), "differs in what only rightsize-go sees") {
		t.Fatalf("a keep-alive of another ReuseKey: start = %v, want it refused", err)
	}
	if second.name != first.name {
		t.Errorf("the family's hash named them %s and %s: the case tests nothing", first.name, second.name)
	}
	again, _, err := start(tbOwner{t}, spec, origin.Of(t))
	if err != nil || again.name != first.name {
		t.Errorf("the same spec again: %v (%s), want %s adopted", err, again.name, first.name)
	}
}
