package sandboxtest_test

import (
	"context"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// volumesOf returns the anonymous volumes of container name (those its
// image's VOLUME made), registering their removal when the test ends.
func (r *rig) volumesOf(name string) []string {
	r.t.Helper()
	c, ok := r.inspect(name)
	if !ok {
		r.t.Fatalf("no container %s", name)
	}
	var vols []string
	for _, m := range c.Mounts {
		if m.Type == "volume" && m.Destination == testimage.VolumePath {
			vols = append(vols, m.Name)
		}
	}
	if len(vols) != 1 {
		r.t.Fatalf("container %s has volumes %q at %s, want one anonymous volume", name, vols, testimage.VolumePath)
	}
	r.t.Cleanup(func() {
		for _, v := range vols {
			if r.volumeGone(v) {
				continue
			}
			if _, err := r.cli.VolumeRemove(context.Background(), v, client.VolumeRemoveOptions{Force: true}); err != nil {
				r.t.Errorf("cleanup: remove volume %s: %v", v, err)
			} else {
				r.t.Logf("cleanup removed volume %s", v)
			}
		}
	})
	return vols
}

// volumeGone reports whether volume v no longer exists.
func (r *rig) volumeGone(v string) bool {
	_, err := r.cli.VolumeInspect(context.Background(), v, client.VolumeInspectOptions{})
	return cerrdefs.IsNotFound(err)
}

// An image's VOLUME gives each container an anonymous volume, and every
// path that removes the container removes it too: the script watchdog
// and the native one after a SIGKILL of their owner, the next process's
// sweep when no watchdog was left, and Stop.
func TestAnonymousVolumesGoWithTheirContainer(t *testing.T) {
	r := newRig(t)
	testimage.Volume(t)
	for _, c := range []struct{ name, env, sweeps string }{
		{"script watchdog", reaper.EnvWatchdog + "=" + reaper.ScriptWatchdog, ""},
		{"native watchdog", reaper.EnvWatchdog + "=" + reaper.NativeWatchdog, ""},
		{"next sweep", reaper.EnvReaper + "=sweep", "sweep"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &rig{t: t, cli: r.cli}
			cache := t.TempDir()
			h := startHelper(t, "volume-owner", cache, c.env)
			run, name := h.Expect("run"), h.Expect("sandbox")
			r.closeRun(run)
			kind := h.Expect("watchdog.kind")
			if c.sweeps == "" && kind != c.env[len(reaper.EnvWatchdog)+1:] {
				t.Skipf("the owner's watchdog is %q here (no /bin/sh here?), not the one this case is for", kind)
			}
			vols := r.volumesOf(name)
			h.KillAndWait()
			if c.sweeps != "" {
				s := startHelper(t, "sweeper", cache, "RZ_TEST_SWEPT_RUN="+run)
				if got := s.Expect("decision"); got != string(reaper.Reaped) {
					t.Errorf("the next process's sweep decided %q for the dead run: %s", got, s.Expect("reason"))
				}
				s.Finish()
			}
			proctest.WaitUntil(t, 30*time.Second, "the container and its volume to be gone", func() bool {
				_, there := r.inspect(name)
				return !there && r.volumeGone(vols[0])
			})
			// The watchdog writes the run's fate last, into the test's
			// cache dir: not after the test has removed that.
			proctest.WaitUntil(t, 30*time.Second, "the run's watchdog to finish", func() bool {
				return ledger.LiveWatchdog(cache, run) == 0
			})
		})
	}
	t.Run("Stop", func(t *testing.T) {
		r := &rig{t: t, cli: r.cli}
		g := sandboxtest.Start(t, sandboxtest.Spec{Image: testimage.Volume(t), Cmd: []string{testimage.ServerPath}})
		vols := r.volumesOf(g.Name())
		if err := g.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !r.volumeGone(vols[0]) {
			t.Errorf("volume %s of %s outlived Stop", vols[0], g.Name())
		}
	})
}

// helperVolumeOwner starts one sandbox of the volume image, says its run,
// its watchdog's kind and its name, and blocks.
func helperVolumeOwner(t *testing.T) {
	g := sandboxtest.Start(t, sandboxtest.Spec{Image: testimage.Volume(t), Cmd: []string{testimage.ServerPath}})
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("run", in.RunID)
	proctest.Say("watchdog.kind", in.WatchdogKind)
	proctest.Say("sandbox", g.Name())
	proctest.Block()
}
