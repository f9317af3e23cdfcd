package msb

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// The tests of this file run testdata/msb-standin, a POSIX sh STAND-IN for
// msb, as a real process: only for what needs a sandbox that booted, which
// the real msb cannot give where no microVM boots (the tests of
// real_test.go run the real one for everything up to the boot). It
// reproduces what msb 0.6.18 says, as seen in those tests.

// standin returns a driver on the stand-in, with a state folder of its
// own, and at the end of the test ends every attached `msb run` it holds.
func standin(t *testing.T) (*Driver, string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the msb stand-in is a POSIX sh script")
	}
	path, err := filepath.Abs(filepath.Join("testdata", "msb-standin"))
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	t.Setenv("MSB_STANDIN_STATE", state)
	t.Setenv("MSB_STANDIN_LIFETIME", "120")
	return newDriver(t, path, ""), state
}

// newDriver is a Driver on the msb at path with home as MSB_HOME ("": the
// default); at the end of the test it ends every attached `msb run` it
// still holds.
func newDriver(t *testing.T, path, home string) *Driver {
	t.Helper()
	d := &Driver{path: path, home: home, live: map[string]*sandbox{}}
	t.Cleanup(func() {
		d.mu.Lock()
		live := slices.Collect(maps.Values(d.live))
		d.mu.Unlock()
		for _, s := range live {
			s.release(0)
		}
	})
	return d
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// invocations is the stand-in's log: one line per run, its arguments.
func invocations(t *testing.T, state string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "invocations.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func sandboxFile(state, name string) string { return filepath.Join(state, "sandboxes", name) }

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func exited(s *sandbox) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func create(t *testing.T, d *Driver, name string, spec backend.Spec) *sandbox {
	t.Helper()
	if spec.Image == "" {
		spec.Image, spec.Cmd = "busybox:stable", []string{"sleep", "3600"}
	}
	sb, err := d.Create(testContext(t), name, spec)
	if err != nil {
		t.Fatal(err)
	}
	return sb.(*sandbox)
}

func TestStandinLifecycle(t *testing.T) {
	d, state := standin(t)
	ctx := testContext(t)
	const name = "rz-0a1b2c3d-1"

	sb, err := d.Create(ctx, name, backend.Spec{
		Image:         "busybox:stable",
		Cmd:           []string{"sh", "-c", "echo hello; sleep 3600"},
		Env:           map[string]string{"B": "two words", "A": "1"},
		Ports:         []string{"8080/tcp", "53/udp"},
		MemoryLimitMB: 64,
		RunID:         "0a1b2c3d",
		Labels:        map[string]string{"team": "a b"},
		Files:         []backend.File{{GuestPath: "/etc/app.conf", Content: []byte("x=1\n"), Mode: 0o600}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*sandbox)
	if sb.Name() != name || sb.ID() != name {
		t.Errorf("Name, ID = %q, %q; want %q for both (msb knows sandboxes by name)", sb.Name(), sb.ID(), name)
	}
	if sb.Host() != "127.0.0.1" {
		t.Errorf("Host = %q, want 127.0.0.1", sb.Host())
	}
	tcp, err := sb.MappedPort(ctx, "8080")
	if err != nil {
		t.Fatal(err)
	}
	udp, err := sb.MappedPort(ctx, "53/udp")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{tcp, udp} {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			t.Errorf("mapped port %q is not a port number", p)
		}
	}
	if _, err := sb.MappedPort(ctx, "9999/tcp"); err == nil {
		t.Error("MappedPort of an unpublished port succeeded")
	}

	mounted, err := filepath.Glob(filepath.Join(s.files, "*-app.conf"))
	if err != nil || len(mounted) != 1 {
		t.Fatalf("mounted file not found in %s: %v %v", s.files, mounted, err)
	}
	if fi, err := os.Stat(mounted[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mounted file mode: %v, %v; want -rw-------", fi.Mode(), err)
	}
	if !exists(t, sandboxFile(state, name)) {
		t.Fatal("the stand-in has no sandbox after Create")
	}

	adopted, err := d.Adopt(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if adopted != sb {
		t.Error("Adopt of a sandbox this driver started did not return it (its ports would be lost)")
	}
	logs, err := sb.Logs(ctx)
	if err != nil || !strings.Contains(logs, "booted from image busybox:stable") {
		t.Errorf("Logs = %q, %v", logs, err)
	}

	if err := sb.Stop(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if !exited(s) {
		t.Error("the attached msb run is still running after Stop")
	}
	if exists(t, sandboxFile(state, name)) {
		t.Error("the stand-in still has the sandbox after Stop")
	}
	if exists(t, s.files) {
		t.Errorf("mounted files %s outlived the sandbox", s.files)
	}
	if _, err := d.Adopt(ctx, name); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Adopt after Stop: %v, want ErrNotFound", err)
	}
	if _, err := sb.Logs(ctx); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Logs after Stop: %v, want ErrNotFound", err)
	}

	before := len(invocations(t, state))
	if err := sb.Stop(ctx, time.Second); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if after := len(invocations(t, state)); after != before {
		t.Errorf("second Stop ran msb %d more times; a stopped sandbox needs nothing", after-before)
	}
	if len(d.live) != 0 {
		t.Errorf("driver still tracks %v", slices.Collect(maps.Keys(d.live)))
	}
}

// A running sandbox is removed by Remove as a stopped one is (real_test.go),
// the attached supervisor of this process's own ended with it; what is not
// the run's keeps running.
func TestStandinRemoveRunning(t *testing.T) {
	d, state := standin(t)
	ctx := testContext(t)
	const run = "0a1b2c3d"
	mine := create(t, d, "rz-0a1b2c3d-1", backend.Spec{RunID: run})
	create(t, d, "rz-other-1", backend.Spec{RunID: "99999999"})
	create(t, d, "rz-family-1", backend.Spec{})
	create(t, d, "rz-reuse-799aad5a3338", backend.Spec{KeepAlive: "799aad5a3338"})

	errs := d.Remove(ctx, backend.SandboxKind, run, []string{"rz-0a1b2c3d-1", "rz-other-1", "rz-family-1", "rz-reuse-799aad5a3338"})
	for i, want := range []error{nil, backend.ErrNotOwned, nil, backend.ErrNotOwned} {
		if !errors.Is(errs[i], want) || (want == nil && errs[i] != nil) {
			t.Errorf("outcome %d: %v, want %v", i, errs[i], want)
		}
	}
	for name, want := range map[string]bool{"rz-0a1b2c3d-1": false, "rz-other-1": true, "rz-family-1": false, "rz-reuse-799aad5a3338": true} {
		if exists(t, sandboxFile(state, name)) != want {
			t.Errorf("%s exists: %v, want %v", name, !want, want)
		}
	}
	if !exited(mine) {
		t.Error("the attached msb run of a removed sandbox is still running")
	}
	if err := mine.Stop(ctx, time.Second); err != nil {
		t.Errorf("Stop after removal by name: %v", err)
	}
	if err := d.RemoveKeepAlive(ctx, "rz-reuse-799aad5a3338", "799aad5a3338"); err != nil {
		t.Errorf("RemoveKeepAlive of a running one: %v", err)
	}
}

func TestStandinAdoptForeign(t *testing.T) {
	d, state := standin(t)
	adopter := newDriver(t, d.path, "") // another process, as far as the adopter knows
	ctx := testContext(t)
	const name = "rz-reuse-799aad5a3338"
	started := create(t, d, name, backend.Spec{KeepAlive: "799aad5a3338"})

	sb, err := adopter.Adopt(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.MappedPort(ctx, "6379/tcp"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("MappedPort of an adopted sandbox: %v, want ErrUnsupported", err)
	}
	if err := sb.Stop(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if exists(t, sandboxFile(state, name)) {
		t.Error("the sandbox survived Stop")
	}
	// msb stop ended the creator's attached supervisor.
	<-started.done
}

func TestStandinDuplicateCreateRefused(t *testing.T) {
	d, _ := standin(t)
	create(t, d, "rz-dup-1", backend.Spec{})
	if _, err := d.Create(testContext(t), "rz-dup-1", backend.Spec{Image: "busybox"}); err == nil {
		t.Error("a second Create of a live name succeeded")
	}
}

func TestStandinIsCleanPOSIXSh(t *testing.T) {
	fi, err := os.Stat(filepath.Join("testdata", "msb-standin"))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0 {
		t.Error("testdata/msb-standin lost its executable bit")
	}
	for _, script := range []string{"msb-standin", "msb-recorder"} {
		for _, tool := range [][]string{{"dash", "-n"}, {"shellcheck", "-s", "sh"}} {
			if _, err := exec.LookPath(tool[0]); err != nil {
				t.Logf("%s not installed: skipped", tool[0])
				continue
			}
			out, err := exec.Command(tool[0], append(tool[1:], filepath.Join("testdata", script))...).CombinedOutput()
			if err != nil {
				t.Errorf("%s %s: %v\n%s", strings.Join(tool, " "), script, err, out)
			}
		}
	}
}

func TestOpenWithoutBinary(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("PATH and mode bits differ on Windows")
	}
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	t.Setenv(EnvPath, "")
	_, err := Open(t.Context())
	if !errors.Is(err, backend.ErrUnreachable) {
		t.Fatalf("Open with no msb anywhere: %v, want ErrUnreachable", err)
	}
	for _, want := range []string{"MSB_PATH", "PATH", "install microsandbox"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %q: %v", want, err)
		}
	}

	notExec := filepath.Join(empty, "msb")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want, reason string }{
		{filepath.Join(empty, "nope", "msb"), "names no usable file", "a path that does not exist"},
		{empty, "is a directory", "a folder"},
		{notExec, "not executable", "a file without the executable bit"},
	} {
		t.Setenv(EnvPath, tc.path)
		_, err := Open(t.Context())
		if !errors.Is(err, backend.ErrUnreachable) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("MSB_PATH=%s (%s): %v, want ErrUnreachable saying %q and naming the path", tc.path, tc.reason, err, tc.want)
		}
	}
}
