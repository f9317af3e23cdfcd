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

// Every test here runs testdata/msb-standin, a POSIX sh stand-in for msb,
// as a real process: no Go fake stands between the driver and a command.

// standin points MSB_PATH at the stand-in, gives it a fresh state folder
// and clears its failure hooks. It returns the state folder.
func standin(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the msb stand-in is a POSIX sh script")
	}
	path, err := filepath.Abs(filepath.Join("testdata", "msb-standin"))
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	t.Setenv(EnvPath, path)
	t.Setenv("MSB_STANDIN_STATE", state)
	t.Setenv("MSB_STANDIN_DB_ERRORS", "")
	t.Setenv("MSB_STANDIN_RM_ERROR", "")
	t.Setenv("MSB_STANDIN_RUN_ERROR", "")
	t.Setenv("MSB_STANDIN_LIFETIME", "120")
	return state
}

// newDriver opens a Driver on the current MSB_PATH and, at the end of the
// test, ends every attached `msb run` it still holds.
func newDriver(t *testing.T) *Driver {
	t.Helper()
	d, err := open()
	if err != nil {
		t.Fatal(err)
	}
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
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
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

func count(lines []string, line string) int {
	n := 0
	for _, l := range lines {
		if l == line {
			n++
		}
	}
	return n
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

func create(t *testing.T, d *Driver, name string) *sandbox {
	t.Helper()
	sb, err := d.Create(testContext(t), name, backend.Spec{Image: "busybox:stable", Cmd: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	return sb.(*sandbox)
}

func TestLifecycle(t *testing.T) {
	state := standin(t)
	d := newDriver(t)
	ctx := testContext(t)
	const name = "rz-0a1b2c3d-1"

	sb, err := d.Create(ctx, name, backend.Spec{
		Image:         "busybox:stable",
		Cmd:           []string{"sh", "-c", "echo hello; sleep 3600"},
		Env:           map[string]string{"B": "two words", "A": "1"},
		Ports:         []string{"8080/tcp", "53/udp"},
		MemoryLimitMB: 64,
		Labels:        map[string]string{"dev.rightsize.runId": "0a1b2c3d"},
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

	log := invocations(t, state)
	want := strings.Join([]string{"run", "--name", name, "-m", "64M",
		"-p", tcp + ":8080", "-p", udp + ":53/udp",
		"-e", "A=1", "-e", "B=two words",
		"--mount-file", mounted[0] + ":/etc/app.conf:rw,nodev",
		"busybox:stable", "--", "sh", "-c", "echo hello; sleep 3600"}, " ")
	// The readiness poll's first `ls` may reach the log before `run` does.
	runs := slices.DeleteFunc(slices.Clone(log), func(l string) bool { return !strings.HasPrefix(l, "run ") })
	if len(runs) != 1 || runs[0] != want {
		t.Errorf("msb run invocations:\n got %q\nwant [%s]", runs, want)
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

	// msb keeps no labels: a keep-alive name is the only mark, and no run
	// removes it, whatever its list says.
	keep := create(t, d, "rz-reuse-799aad5a3338")
	if err := d.Remove(ctx, backend.SandboxKind, "r1", []string{"rz-reuse-799aad5a3338"})[0]; !errors.Is(err, backend.ErrNotOwned) {
		t.Errorf("remove a keep-alive sandbox for a run: %v, want ErrNotOwned", err)
	}
	if !exists(t, sandboxFile(state, "rz-reuse-799aad5a3338")) {
		t.Error("the keep-alive sandbox was removed")
	}
	if err := d.RemoveKeepAlive(ctx, "rz-reuse-799aad5a3338", "799aad5a3338"); err != nil {
		t.Errorf("RemoveKeepAlive: %v", err)
	}
	_ = keep
}

func TestAdoptForeign(t *testing.T) {
	state := standin(t)
	creator := newDriver(t) // another process, as far as the adopter knows
	adopter := newDriver(t)
	ctx := testContext(t)
	const name = "rz-reuse-799aad5a3338"
	started := create(t, creator, name)

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

	if _, err := adopter.Adopt(ctx, "rz-never-was"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Adopt of an unknown name: %v, want ErrNotFound", err)
	}
}

func TestAdoptStoppedIsNotFound(t *testing.T) {
	standin(t)
	d := newDriver(t)
	ctx := testContext(t)
	s := create(t, d, "rz-stopped-1")
	if r := d.run(ctx, "stop", s.name); r.err != nil {
		t.Fatal(r.failure())
	}
	<-s.done
	if _, err := newDriver(t).Adopt(ctx, s.name); !errors.Is(err, backend.ErrNotFound) || !strings.Contains(err.Error(), "Stopped") {
		t.Errorf("Adopt of a stopped sandbox: %v, want ErrNotFound naming its status", err)
	}
}

func TestRemoveSandboxes(t *testing.T) {
	state := standin(t)
	d := newDriver(t)
	ctx := testContext(t)
	s := create(t, d, "rz-gone-1")

	errs := d.Remove(ctx, backend.SandboxKind, "r1", []string{"rz-gone-1", "rz-missing-1", "bad name"})
	if len(errs) != 3 {
		t.Fatalf("%d outcomes for 3 names", len(errs))
	}
	if errs[0] != nil {
		t.Errorf("existing sandbox: %v, want nil", errs[0])
	}
	if !errors.Is(errs[1], backend.ErrNotFound) {
		t.Errorf("unknown sandbox: %v, want ErrNotFound", errs[1])
	}
	if !errors.Is(errs[2], ErrInvalidName) || errors.Is(errs[2], backend.ErrNotFound) {
		t.Errorf("invalid name: %v, want ErrInvalidName and not ErrNotFound", errs[2])
	}
	if exists(t, sandboxFile(state, "rz-gone-1")) {
		t.Error("rz-gone-1 still exists")
	}
	if !exited(s) {
		t.Error("the attached msb run of a removed sandbox is still running")
	}
	if err := s.Stop(ctx, time.Second); err != nil {
		t.Errorf("Stop after removal by name: %v", err)
	}
	if got := d.Remove(ctx, backend.SandboxKind, "r1", nil); len(got) != 0 {
		t.Errorf("no names: %v", got)
	}
}

func TestRemoveSandboxesOtherFailure(t *testing.T) {
	state := standin(t)
	creator := newDriver(t)
	reaper := newDriver(t)
	ctx := testContext(t)
	create(t, creator, "rz-stuck-1")
	t.Setenv("MSB_STANDIN_RM_ERROR", "io error: Input/output error (os error 5)")

	err := reaper.Remove(ctx, backend.SandboxKind, "r1", []string{"rz-stuck-1"})[0]
	switch {
	case err == nil:
		t.Fatal("a failed rm reported the sandbox gone")
	case errors.Is(err, backend.ErrNotFound):
		t.Fatalf("a failed rm reported not found: %v", err)
	case !strings.Contains(err.Error(), "error: io error: Input/output error (os error 5)"):
		t.Errorf("the error does not quote msb: %v", err)
	case !strings.Contains(err.Error(), "rz-stuck-1"):
		t.Errorf("the error does not name the sandbox: %v", err)
	}
	if !exists(t, sandboxFile(state, "rz-stuck-1")) {
		t.Error("the stand-in lost the sandbox")
	}
}

func TestRemoveRetriesDatabaseErrorOnce(t *testing.T) {
	for _, tc := range []struct {
		dbErrors         string
		stoppedFirst     bool
		wantErr          bool
		wantStop, wantRm int
		reason           string
	}{
		{"1", false, false, 2, 1, "the first stop hits the database error and is retried once; then stop and rm work"},
		{"2", false, true, 2, 1, "the retried stop fails again: no third stop, the sandbox still runs, so rm refuses and the failure is reported"},
		{"3", true, false, 2, 2, "(already stopped) both stops fail harmlessly, the first rm fails and its retry works"},
		{"4", true, true, 2, 2, "(already stopped) rm fails again on its retry: no third rm, the failure is reported"},
	} {
		t.Run("db_errors="+tc.dbErrors, func(t *testing.T) {
			state := standin(t)
			creator := newDriver(t)
			reaper := newDriver(t)
			ctx := testContext(t)
			const name = "rz-dberr-1"
			s := create(t, creator, name)
			if tc.stoppedFirst {
				if r := creator.run(ctx, "stop", name); r.err != nil {
					t.Fatal(r.failure())
				}
				<-s.done
			}
			t.Setenv("MSB_STANDIN_DB_ERRORS", tc.dbErrors)
			before := len(invocations(t, state))

			start := time.Now()
			err := reaper.Remove(ctx, backend.SandboxKind, "r1", []string{name})[0]
			took := time.Since(start)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v (%s)", err, tc.wantErr, tc.reason)
			}
			if tc.wantErr && (errors.Is(err, backend.ErrNotFound) || !strings.Contains(err.Error(), "error: database error:")) {
				t.Errorf("err = %v, want msb's database error quoted, not ErrNotFound", err)
			}
			log := invocations(t, state)[before:]
			if got := count(log, "stop "+name); got != tc.wantStop {
				t.Errorf("stop ran %d times, want %d (%s)", got, tc.wantStop, tc.reason)
			}
			if got := count(log, "rm "+name); got != tc.wantRm {
				t.Errorf("rm ran %d times, want %d (%s)", got, tc.wantRm, tc.reason)
			}
			retries := tc.wantStop - 1 + tc.wantRm - 1
			if min := time.Duration(retries) * retryDelay; took < min {
				t.Errorf("took %v for %d retries, want at least %v each", took, retries, retryDelay)
			}
			if exists(t, sandboxFile(state, name)) == !tc.wantErr {
				t.Errorf("sandbox exists = %v after err = %v", !tc.wantErr, err)
			}
		})
	}
}

func TestHostileNamesRunNothing(t *testing.T) {
	state := standin(t)
	d := newDriver(t)
	ctx := testContext(t)
	for _, name := range []string{
		"", "-rf", "--help", "../../etc", "a/b", "a b", "a;rm -rf /", "$(id)", "a\nb", ".hidden", "_x",
		"é", strings.Repeat("a", 129),
		"deadbeef", // hex only, fewer than 12: the family refuses an id prefix (internal/names)
	} {
		if _, err := d.Create(ctx, name, backend.Spec{Image: "busybox"}); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Create(%q): %v, want ErrInvalidName", name, err)
		}
		if _, err := d.Adopt(ctx, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Adopt(%q): %v, want ErrInvalidName", name, err)
		}
		if err := d.Remove(ctx, backend.SandboxKind, "r1", []string{name})[0]; !errors.Is(err, ErrInvalidName) {
			t.Errorf("RemoveSandboxes(%q): %v, want ErrInvalidName", name, err)
		}
	}
	for _, image := range []string{"--entrypoint=/bin/sh", "-d", "busybox --privileged", "a\tb", ""} {
		if _, err := d.Create(ctx, "rz-ok-1", backend.Spec{Image: image}); err == nil {
			t.Errorf("Create with image %q succeeded", image)
		}
	}
	if log := invocations(t, state); log != nil {
		t.Errorf("msb ran for refused input: %q", log)
	}
	// The longest name the grammar allows is used as is.
	long := strings.Repeat("a", 128)
	create(t, d, long)
	if err := d.Remove(ctx, backend.SandboxKind, "r1", []string{long})[0]; err != nil {
		t.Errorf("128-byte name: %v", err)
	}
}

func TestCreateFailureLeavesNoProcess(t *testing.T) {
	standin(t)
	d := newDriver(t)
	t.Setenv("MSB_STANDIN_RUN_ERROR", "image error: failed to pull busybox:nope")
	_, err := d.Create(testContext(t), "rz-fail-1", backend.Spec{Image: "busybox:nope"})
	if err == nil || !strings.Contains(err.Error(), "error: image error: failed to pull busybox:nope") {
		t.Fatalf("Create: %v, want msb's own error quoted", err)
	}
	if len(d.live) != 0 {
		t.Errorf("a failed Create left %v tracked", slices.Collect(maps.Keys(d.live)))
	}
}

func TestCreateDeadline(t *testing.T) {
	standin(t)
	d := newDriver(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := d.Create(ctx, "rz-late-1", backend.Spec{Image: "busybox"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Create with a cancelled context: %v", err)
	}
	if len(d.live) != 0 {
		t.Error("a cancelled Create left its msb run tracked")
	}
}

func TestDuplicateCreateRefused(t *testing.T) {
	standin(t)
	d := newDriver(t)
	create(t, d, "rz-dup-1")
	if _, err := d.Create(testContext(t), "rz-dup-1", backend.Spec{Image: "busybox"}); err == nil {
		t.Error("a second Create of a live name succeeded")
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

func TestResolveFindsMsb(t *testing.T) {
	standin(t)
	t.Setenv(backend.EnvBackend, "microsandbox")
	d, err := backend.Resolve(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d.Name() != backend.Msb || d.Endpoint() != "" {
		t.Errorf("Name, Endpoint = %q, %q", d.Name(), d.Endpoint())
	}
	p, ok := d.(interface{ MsbPath() string })
	if !ok || p.MsbPath() != os.Getenv(EnvPath) {
		t.Errorf("the resolved driver does not expose the msb path %s", os.Getenv(EnvPath))
	}
}

// copyStandin copies the stand-in to dir/name, executable.
func copyStandin(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "msb-standin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMsbPathWithSpace(t *testing.T) {
	state := standin(t)
	p := copyStandin(t, filepath.Join(t.TempDir(), "Application Support", "micro sandbox"), "msb")
	t.Setenv(EnvPath, p)
	d := newDriver(t)
	if d.MsbPath() != p {
		t.Fatalf("MsbPath = %q, want %q", d.MsbPath(), p)
	}
	ctx := testContext(t)
	sb := create(t, d, "rz-space-1")
	if err := sb.Stop(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if got := invocations(t, state); count(got, "rm rz-space-1") != 1 {
		t.Errorf("the stand-in at %q did not run: %q", p, got)
	}

	plan, err := d.Watchdog("r1")
	if err != nil {
		t.Fatal(err)
	}
	if plan.Env[0] != "MSB_PATH="+p {
		t.Errorf("the watchdog plan does not carry the path as one word: %+v", plan)
	}
}

func TestMsbFromPath(t *testing.T) {
	standin(t)
	dir := t.TempDir()
	p := copyStandin(t, dir, "msb")
	t.Setenv(EnvPath, "")
	t.Setenv("PATH", dir)
	if d := newDriver(t); d.MsbPath() != p {
		t.Errorf("MsbPath = %q, want %q", d.MsbPath(), p)
	}
}

func TestWatchdog(t *testing.T) {
	standin(t)
	d := newDriver(t)
	plan, err := d.Watchdog("r1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Env, []string{"MSB_PATH=" + d.MsbPath(), "RIGHTSIZE_BACKEND=msb"}) || plan.Hold {
		t.Errorf("plan = %+v, want the watchdog on this msb, holding nothing", plan)
	}
	if _, ok := any(d).(backend.RunLister); ok {
		t.Error("msb keeps no labels: a RunLister would make the watchdog look by label, and be told ids after the create")
	}
}

func TestNetworks(t *testing.T) {
	standin(t)
	d := newDriver(t)
	ctx := testContext(t)
	if _, err := d.CreateNetwork(ctx, "rz-net-0a1b2c3d", "r1"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("CreateNetwork: %v, want ErrUnsupported", err)
	}
	errs := d.Remove(ctx, backend.NetworkKind, "r1", []string{"rz-net-0a1b2c3d", "anything"})
	if len(errs) != 2 || errs[0] != nil || errs[1] != nil {
		t.Errorf("RemoveNetworks: %v, want nil for every name", errs)
	}
	if _, err := d.Create(ctx, "rz-netted-1", backend.Spec{Image: "busybox", Networks: map[string][]string{"rz-net-1": {"db"}}}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Create on a network: %v, want ErrUnsupported", err)
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
	for _, tool := range [][]string{{"dash", "-n"}, {"shellcheck", "-s", "sh"}} {
		if _, err := exec.LookPath(tool[0]); err != nil {
			t.Logf("%s not installed: skipped", tool[0])
			continue
		}
		out, err := exec.Command(tool[0], append(tool[1:], filepath.Join("testdata", "msb-standin"))...).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(tool, " "), err, out)
		}
	}
}
