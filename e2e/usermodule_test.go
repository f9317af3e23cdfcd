//go:build linux

package e2e_test

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/usermod"
)

// The user's path. A test binary built as a user builds one — a
// module of its own that imports only the public packages, as the README
// says, and no TestMain (internal/usermod) — is SIGKILLed, timed out by
// its own -test.timeout alarm, or passes: the watchdog it got from
// sandboxtest's init removes everything, and nothing of the bystander is
// touched. The repository's own test binaries enter the watchdog from a
// TestMain of theirs, after every init; a user's does not.
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
		{name: "test timeout", timeout: "20s", end: func(t *testing.T, o *owner) {
			if !o.Wait(exitWithin) {
				t.Fatal("the -test.timeout alarm did not end the owner")
			}
			if want := "panic: test timed out after 20s"; !strings.Contains(o.Output(), want) {
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
			o := r.startUser(tc.name, bin, tc.timeout, tc.pass)
			o.checkAlive("the user's test, before it ends")
			tc.end(t, o)
			took := r.waitGone(o, "after the user's test ended ("+tc.name+")")
			t.Logf("%s: %d sandboxes, network %s, run %s: all gone %s after the end", tc.name,
				len(o.sandboxes), strings.Join(o.networks, ","), o.run, ms(took))
		})
	}
}

// startUser starts the user's test binary bin in the rig's cache dir, with
// the rig's image, and waits until it has started two sandboxes and a
// network. With pass, the test passes once its stdin closes.
func (r *rig) startUser(name, bin, timeout string, pass bool, env ...string) *owner {
	r.t.Helper()
	info := filepath.Join(r.t.TempDir(), "info")
	extra := []string{usermod.EnvImage + "=" + r.img, usermod.EnvInfo + "=" + info}
	if pass {
		extra = append(extra, usermod.EnvPass+"=1")
	}
	proc, err := proctest.Start(proctest.Spec{
		Name: "user's test (" + name + ")",
		Argv: []string{bin, "-test.run=^TestHolds$", "-test.count=1", "-test.timeout=" + timeout},
		Env:  harness.OwnerEnv(nil, r.cache, harness.Plan{}, r.ownerEnv(append(extra, env...)...)...),
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
	o.sandboxes = in.Sandboxes
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
