//go:build linux

package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/usermod"
)

// The user's path. A test binary built as a user builds one — a
// module of its own that imports only the public packages, as the README
// says, and no TestMain (internal/usermod) — is SIGKILLed, timed out by
// its own -test.timeout alarm, or passes: the watchdog it got from
// sandboxtest's init removes everything, and nothing of the bystander is
// touched. The repository's own test binaries enter the watchdog from a
// TestMain of theirs, after every init; a user's does not. Its sandboxes
// mount a named volume of the test's (sandboxtest.NewVolume), which goes
// with them.
func TestUserModuleDies(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	bin := usermod.Build(t, usermod.Store)
	for _, tc := range []struct {
		name    string
		timeout string // the binary's -test.timeout
		pass    bool
		end     func(*testing.T, *owner)
	}{
		{name: "SIGKILL", timeout: "20m", end: func(t *testing.T, o *owner) {
			o.kill()
			if sig, ok := o.Signaled(); !ok || sig != syscall.SIGKILL {
				t.Errorf("the owner ended with %s, want SIGKILL", o.Status())
			}
		}},
		// 45 s: the alarm must not ring before the user's test has
		// started everything, and 20 s was too little for Podman beside
		// make test's other gates (its container start still waiting).
		{name: "test timeout", timeout: "45s", end: func(t *testing.T, o *owner) {
			if !o.Wait(exitWithin) {
				t.Fatal("the -test.timeout alarm did not end the owner")
			}
			if want := "panic: test timed out after 45s"; !strings.Contains(o.Output(), want) {
				t.Errorf("want %q in the owner's output:\n%s", want, o.Output())
			}
		}},
		{name: "passes", timeout: "20m", pass: true, end: func(t *testing.T, o *owner) {
			o.CloseStdin()
			if !o.Wait(exitWithin) {
				t.Fatal("the passing owner did not end")
			}
			if _, err := o.Exited(); err != nil {
				t.Errorf("the passing owner: %v\n%s", err, o.Output())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := r.sub(t)
			o := r.startUser(tc.name, bin, tc.timeout, tc.pass, usermod.EnvVolume+"=1", usermod.EnvBuild+"=1")
			o.checkAlive("the user's test, before it ends")
			o.checkVolumes()
			o.checkImages()
			tc.end(t, o)
			took := r.waitGone(o, "after the user's test ended ("+tc.name+")")
			t.Logf("%s: %d sandboxes, network %s, volume %s, image %s, run %s: all gone %s after the end", tc.name,
				len(o.sandboxes), strings.Join(o.networks, ","), strings.Join(o.volumes, ","), strings.Join(o.images, ","), o.run, ms(took))
		})
	}
}

// checkVolumes fails the test unless the user's test said it made one
// named volume, which the engine has, labelled with the run, and which its
// sandboxes mount.
func (o *owner) checkVolumes() {
	o.r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := o.eng.RunVolumes(ctx, o.run)
	if err != nil {
		o.r.t.Fatal(err)
	}
	if len(o.volumes) != 1 || !slices.Equal(got, o.volumes) || !strings.HasPrefix(o.volumes[0], "rz-vol-") {
		o.r.t.Fatalf("the user's test said it made volumes %q; the engine has %q labelled with run %s; want one rz-vol-", o.volumes, got, o.run)
	}
	for _, sb := range o.sandboxes {
		mounts, err := o.eng.Mounts(ctx, sb)
		if err != nil {
			o.r.t.Fatal(err)
		}
		if !slices.Contains(mounts, o.volumes[0]+":/data") {
			o.r.t.Errorf("sandbox %s mounts %q; want %s at /data", sb, mounts, o.volumes[0])
		}
	}
}

// checkImages fails the test unless the user's test said it built one
// image, which the engine has, marked as the run's, and which its
// sandboxes run from.
func (o *owner) checkImages() {
	o.r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := o.eng.RunImages(ctx, o.run)
	if err != nil {
		o.r.t.Fatal(err)
	}
	if len(o.images) != 1 || len(got) == 0 || !strings.HasPrefix(o.images[0], "rz-img-") {
		o.r.t.Fatalf("the user's test said it built images %q; the engine has %q marked with run %s; want one rz-img-", o.images, got, o.run)
	}
	for _, sb := range o.sandboxes {
		img, err := o.eng.ImageOf(ctx, sb)
		if err != nil {
			o.r.t.Fatal(err)
		}
		if !harness.SameImage(img, o.images[0]) {
			o.r.t.Errorf("sandbox %s runs image %q; want %s", sb, img, o.images[0])
		}
	}
}

// startUser starts the user's test binary bin in the rig's cache dir, with
// the rig's image, and waits until it has started two sandboxes and a
// network. With pass, the test passes once its stdin closes.
func (r *rig) startUser(name, bin, timeout string, pass bool, env ...string) *owner {
	r.t.Helper()
	return r.startUserTest(name, bin, "^TestHolds$", timeout, pass, env...)
}

// startUserTest is startUser of the user's tests that run matches.
func (r *rig) startUserTest(name, bin, run, timeout string, pass bool, env ...string) *owner {
	r.t.Helper()
	info := filepath.Join(r.t.TempDir(), "info")
	// A TMPDIR of the row's own: the user's t.TempDir (the Dockerfile of
	// its build) outlives a killed test, and this one goes with the row.
	// It comes first, so a caller's own TMPDIR wins.
	extra := []string{"TMPDIR=" + r.t.TempDir(), usermod.EnvImage + "=" + r.img, usermod.EnvInfo + "=" + info}
	if pass {
		extra = append(extra, usermod.EnvPass+"=1")
	}
	proc, err := proctest.Start(proctest.Spec{
		Name: "user's test (" + name + ")",
		Argv: []string{bin, "-test.run=" + run, "-test.count=1", "-test.timeout=" + timeout},
		Env:  r.userEnv(append(extra, env...)...),
		Dir:  filepath.Dir(bin),
	})
	if err != nil {
		r.t.Fatal(err)
	}
	o := &owner{Proc: proc, name: name, r: r, eng: r.eng}
	r.t.Cleanup(o.cleanup)
	done := make(chan struct{})
	go func() { proc.Wait(readyWithin + exitWithin); close(done) }()
	in, err := usermod.WaitBlocked(info, done, readyWithin)
	if err != nil {
		r.t.Fatalf("%v\n%s", err, proc.Output())
	}
	o.sandboxes, o.volumes, o.images = in.Sandboxes, in.Volumes, in.Images
	if in.Network != "" {
		o.networks = []string{in.Network}
	}
	if len(o.sandboxes) == 0 {
		r.t.Fatalf("the user's test started no sandbox\n%s", proc.Output())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o.run, err = r.eng.Label(ctx, o.sandboxes[0], backend.LabelRunID); err != nil || o.run == "" {
		r.t.Fatalf("the run of the user's sandbox %s: %q, %v", o.sandboxes[0], o.run, err)
	}
	return o
}

// TestUserModuleOrigin: which test made what a crashed user's test left.
// TestCheckout/eu of the user's module starts a network and two sandboxes
// through a helper of its own, and is SIGKILLed. With its watchdog, the
// run's fate, and `rightsize ls --fates`, say they were left by
// TestCheckout/eu at the line of its call of the helper; without one, `rightsize ls`
// (its table, -v and --json) says so of the dead run, and so does the fate
// of the sweep that reaps it.
func TestUserModuleOrigin(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	bin := usermod.Build(t, usermod.Store)
	cli := filepath.Join(t.TempDir(), "rightsize")
	if out, err := exec.Command(goTool(t), "build", "-tags", "rightsize_nokube", "-o", cli, "../cmd/rightsize").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/rightsize: %v\n%s", err, out)
	}
	place, err := usermod.CheckoutPlace()
	if err != nil {
		t.Fatal(err)
	}
	made := origin.Origin{Test: "TestCheckout/eu", Place: place}
	rightsize := func(t *testing.T, r *rig, args ...string) string {
		t.Helper()
		cmd := exec.Command(cli, append(args, "--cache", r.cache)...)
		cmd.Env = append(os.Environ(), "RIGHTSIZE_BACKEND=no-such-backend") // ls asks no engine
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("rightsize %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// checkItems checks that a fate says each of the owner's things was
	// made by TestCheckout/eu.
	checkItems := func(t *testing.T, o *owner, f ledger.FateFile) {
		t.Helper()
		got := map[string]origin.Origin{}
		for _, it := range f.Items {
			got[it.Kind+" "+it.Name] = it.Origin
		}
		for _, n := range o.sandboxes {
			if got["sandbox "+n] != made {
				t.Errorf("the fate says sandbox %s was made by %+v, want %+v", n, got["sandbox "+n], made)
			}
		}
		for _, n := range o.networks {
			if got["network "+n] != made {
				t.Errorf("the fate says network %s was made by %+v, want %+v", n, got["network "+n], made)
			}
		}
		if line := reaper.FateLine(f); !strings.Contains(line, "; left by "+made.String()) {
			t.Errorf("the fate's line %q does not say it was left by %s", line, made)
		}
	}

	t.Run("watchdog", func(t *testing.T) {
		r := r.sub(t)
		o := r.startUserTest("checkout", bin, "^TestCheckout$/^eu$", "20m", false)
		o.kill()
		r.waitGone(o, "after the user's TestCheckout/eu was SIGKILLed")
		fates := r.fatesOf(o.run)
		if len(fates) != 1 {
			t.Fatalf("run %s has %d fates, want 1", o.run, len(fates))
		}
		checkItems(t, o, fates[0])
		if out := rightsize(t, r, "ls", "--fates"); !strings.Contains(out, "left by "+made.String()) {
			t.Errorf("rightsize ls --fates does not say %q:\n%s", "left by "+made.String(), out)
		}
	})

	t.Run("no watchdog", func(t *testing.T) {
		r := r.sub(t)
		o := r.startUserTest("checkout without a watchdog", bin, "^TestCheckout$/^eu$", "20m", false, "RIGHTSIZE_REAPER=sweep")
		o.kill()
		type lsRun struct {
			ID     string
			Status string
			Tests  []struct{ Kind, Name, Test, Place string }
		}
		var runs []lsRun
		if err := json.Unmarshal([]byte(rightsize(t, r, "ls", "--json")), &runs); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(runs, func(x lsRun) bool { return x.ID == o.run })
		if i < 0 {
			t.Fatalf("rightsize ls --json does not list run %s", o.run)
		}
		tests := map[string]string{}
		for _, x := range runs[i].Tests {
			tests[x.Kind+" "+x.Name] = origin.Origin{Test: x.Test, Place: x.Place}.String()
		}
		for _, n := range append(append([]string(nil), o.sandboxes...), o.networks...) {
			kind := "sandbox"
			if slices.Contains(o.networks, n) {
				kind = "network"
			}
			if tests[kind+" "+n] != made.String() {
				t.Errorf("rightsize ls --json says %s %s of dead run %s (%s) was made by %q, want %q", kind, n, o.run, runs[i].Status, tests[kind+" "+n], made)
			}
		}
		table := rightsize(t, r, "ls", "-v")
		for _, n := range o.sandboxes {
			if !strings.Contains(table, n+"  made by "+made.String()) {
				t.Errorf("rightsize ls -v does not say %s was made by %s:\n%s", n, made, table)
			}
		}
		if !regexp.MustCompile(`(?m)^` + o.run + ` .* TestCheckout/eu `).MatchString(table) {
			t.Errorf("rightsize ls's row of run %s does not name TestCheckout/eu:\n%s", o.run, table)
		}
		sweep := exec.Command(cli, "sweep", "--run", o.run, "--cache", r.cache)
		if out, err := sweep.CombinedOutput(); err != nil {
			t.Fatalf("rightsize sweep --run %s: %v\n%s", o.run, err, out)
		}
		r.waitGone(o, "after rightsize sweep")
		fates := r.fatesOf(o.run)
		if len(fates) != 1 {
			t.Fatalf("run %s has %d fates, want 1", o.run, len(fates))
		}
		checkItems(t, o, fates[0])
		if _, err := os.Stat(ledger.OriginsPath(r.cache, o.run)); !os.IsNotExist(err) {
			t.Errorf("the run's origins are still there once it is reaped whole (%v)", err)
		}
	})
}
