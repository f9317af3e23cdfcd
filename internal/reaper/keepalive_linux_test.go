package reaper_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// kaSpec is the keep-alive sandbox the helpers make or adopt.
func kaSpec(img, nonce string) sandboxtest.Spec {
	return sandboxtest.Spec{Image: img, Cmd: []string{"sleep", "3600"}, Env: map[string]string{"RZ_TEST_NONCE": nonce}, Reuse: true}
}

// TestKeepAliveUserHelper is a test process of a user's: it makes or
// adopts the keep-alive of RZ_TEST_NONCE, says its id, and lets it go when
// its stdin closes.
func TestKeepAliveUserHelper(t *testing.T) {
	if role() != "keepalive-user" {
		t.Skip("helper process of TestKeepAliveAdoptedDuringSweep")
	}
	g := sandboxtest.Start(t, kaSpec(os.Getenv("RZ_TEST_IMAGE"), os.Getenv("RZ_TEST_NONCE")))
	proctest.Say("id", g.Container().GetContainerID())
	proctest.Block()
}

// TestKeepAliveAdoptedDuringSweep: a keep-alive idle past its time-to-live
// is removed by the sweep, unless a test process adopts it between the
// sweep's judgement and its removal: held then, or adopted and let go
// already, it is kept, and the process had the sandbox it adopted. The
// adopter is a real process, run at that instant of the sweep.
func TestKeepAliveAdoptedDuringSweep(t *testing.T) {
	d := openDocker(t)
	img := testimage.Busybox(t)
	cache, tmp := t.TempDir(), t.TempDir()
	// Longer than an adopter takes from letting the keep-alive go (its
	// last use) to its exit, when the sweep judges again: on a loaded
	// machine that took more than a second, and the keep-alive was then
	// rightly idle past a time-to-live of one.
	const ttl = 4 * time.Second
	t.Setenv("TMPDIR", tmp) // this sweep's use locks: the test's own
	t.Setenv(reaper.EnvReuseTTL, ttl.String())
	user := func(t *testing.T, n string) *proctest.Helper {
		return startHelper(t, "TestKeepAliveUserHelper", "keepalive-user", cache, helperOpts{env: []string{
			"RIGHTSIZE_REUSE=1", "RZ_TEST_NONCE=" + n, "RZ_TEST_IMAGE=" + img, "TMPDIR=" + tmp,
			"TESTCONTAINERS_RYUK_DISABLED=true"}})
	}
	for _, tc := range []struct {
		name         string
		adopt, holds bool
		want         ledger.Outcome
	}{
		{name: "nobody adopts it", want: ledger.Removed},
		{name: "adopted and held", adopt: true, holds: true, want: ledger.Kept},
		{name: "adopted and let go", adopt: true, want: ledger.Kept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := randHex(t, 8)
			name := ledger.ReuseName(ledger.ReuseIdentity{Image: img, Env: map[string]string{"RZ_TEST_NONCE": n}, Command: []string{"sleep", "3600"}}.Hash())
			t.Cleanup(func() { removeContainer(t, d, name) })
			maker := user(t, n)
			id := maker.Expect("id")
			maker.Finish()
			time.Sleep(ttl) // idle past its time-to-live

			var adopter *proctest.Helper
			reaper.SetBeforeKeepAliveLock(func(ka string) {
				if ka != name || !tc.adopt {
					return
				}
				adopter = user(t, n)
				if got := adopter.Expect("id"); got != id {
					t.Errorf("the adopter got %s, want the idle keep-alive %s", got, id)
				}
				if !tc.holds {
					adopter.Finish()
				}
			})
			defer reaper.SetBeforeKeepAliveLock(nil)
			rep, err := reaper.Sweep(context.Background(), d, reaper.WithCacheDir(cache))
			if err != nil {
				t.Fatal(err)
			}
			var got ledger.Outcome
			for _, it := range rep.KeepAlives {
				if it.Name == name {
					got = it.Outcome
					t.Logf("%s", it)
				}
			}
			if got != tc.want {
				t.Errorf("the sweep: %q for %s, want %q", got, name, tc.want)
			}
			c, err := d.Client().ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
			switch {
			case tc.want == ledger.Removed && err == nil:
				t.Errorf("%s is still there", name)
			case tc.want == ledger.Kept && (err != nil || c.Container.ID != id || !c.Container.State.Running):
				t.Errorf("%s was not kept running as the adopter had it (%v)", name, err)
			}
			if adopter != nil && tc.holds {
				adopter.Finish()
			}
		})
	}
}
