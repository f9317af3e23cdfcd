package sandboxtest_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
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

// A named volume of the test's (NewVolume): in the run's ledger and
// labelled with the run and the test that made it; what one sandbox writes
// there the next reads, read-only when the mount says so; it cannot go
// while a sandbox uses it, and goes, with its ledger line, when its test
// ends.
func TestNamedVolume(t *testing.T) {
	img := testimage.Busybox(t)
	r := newRig(t)
	in, lines, listed := sessionLines(t, ledger.VolumeKind)
	run := func(t *testing.T, g *sandboxtest.Guard, script string) sandboxtest.ExecResult {
		t.Helper()
		res, err := g.Exec(t.Context(), []string{"sh", "-c", script})
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return res
	}
	var name string
	var v *sandboxtest.Volume
	t.Run("made", func(t *testing.T) {
		v = sandboxtest.NewVolume(t)
		name = v.Name()
		t.Cleanup(func() {
			// A failure's leftover. This runs before the volume's own
			// removal (cleanups run last in, first out): only after a
			// failure, or it would do the removal the test checks.
			if t.Failed() && !r.volumeGone(name) {
				_, _ = r.cli.VolumeRemove(context.Background(), name, client.VolumeRemoveOptions{Force: true})
			}
		})
		if !strings.HasPrefix(name, names.VolumePrefix) {
			t.Errorf("volume %q: want the prefix %s", name, names.VolumePrefix)
		}
		vi, err := r.cli.VolumeInspect(t.Context(), name, client.VolumeInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l := vi.Volume.Labels; l[docker.LabelRunID] != in.RunID || l[origin.LabelTest] != t.Name() || !strings.HasPrefix(l[origin.LabelPlace], "volume_test.go:") {
			t.Errorf("volume %s is labelled %v; want run %s, made by %s at volume_test.go:N", name, l, in.RunID, t.Name())
		}
		if !listed(name) {
			t.Errorf("volume %s is not in the run's ledger (%s)", name, lines)
		}
		a := sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{"sleep", "300"}, Mounts: []sandboxtest.Mount{{Volume: v, Path: "/data"}}})
		if res := run(t, a, "echo kept > /data/f"); res.ExitCode != 0 {
			t.Fatalf("write to the volume: %s", res)
		}
		if err := a.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		b := sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{"sleep", "300"}, Mounts: []sandboxtest.Mount{{Volume: v, Path: "/data", ReadOnly: true}}})
		if res := run(t, b, "cat /data/f"); res.ExitCode != 0 || res.Stdout != "kept\n" {
			t.Errorf("the next sandbox reads %s; want what the first wrote, \"kept\"", res)
		}
		if res := run(t, b, "echo no > /data/g"); res.ExitCode == 0 {
			t.Errorf("a read-only mount took a write: %s", res)
		}
		if err := v.Remove(t.Context()); err == nil {
			t.Errorf("the volume was removed while sandbox %s uses it", b.Name())
		} else if r.volumeGone(name) || !listed(name) {
			t.Errorf("a refused removal (%v) took the volume or its ledger line", err)
		}
	})
	if !r.volumeGone(name) {
		t.Errorf("volume %s is still on the engine after its test ended", name)
	}
	if listed(name) {
		t.Errorf("volume %s is still in the run's ledger after its test ended", name)
	}
	// Mounted once removed, it would be made anew by the engine, unlisted
	// and unlabelled: the start is refused.
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sandboxtest.Start(tb, sandboxtest.Spec{Image: img, Cmd: []string{"sleep", "300"}, Mounts: []sandboxtest.Mount{{Volume: v, Path: "/data"}}})
	}()
	<-done
	if want := "its volume " + name + " was removed"; !strings.Contains(tb.msg, want) {
		t.Errorf("a start mounting the removed volume: %q; want it refused, saying %q", tb.msg, want)
	}
	if !r.volumeGone(name) {
		t.Errorf("volume %s was made again", name)
	}
}

// sessionLines is this process's session, the file of its run's ledger
// lines of kind, and whether a name is listed there.
func sessionLines(t *testing.T, kind names.Kind) (sandboxtest.Info, string, func(name string) bool) {
	t.Helper()
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lines := ledger.LinePath(filepath.Join(in.CacheDir, ledger.RunsDir), in.RunID, kind)
	return in, lines, func(name string) bool {
		b, err := os.ReadFile(lines)
		return err == nil && slices.Contains(strings.Split(string(b), "\n"), name)
	}
}
