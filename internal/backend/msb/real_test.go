//go:build unix

package msb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// The tests of this file run the real msb: the release scripts/msb.sh
// installs from the npm registry, named by RIGHTSIZE_TEST_MSB (the msb gate
// of `make test` installs it and sets it), each test with an msb home of
// its own (MSB_HOME), never the user's. Where no microVM boots (this
// machine: docs/backends.md), every sandbox they make stops during its
// boot: they test everything up to it, and what needs a booted one runs
// against the stand-in (standin_test.go).

// envTestMsb names the real msb binary the tests run.
const envTestMsb = "RIGHTSIZE_TEST_MSB"

// testImage is the name the tests load the busybox test image under.
const testImage = "local/busybox:1"

// testRun is the run the tests' sandboxes are labelled with.
const testRun = "0a1b2c3d"

// realMsb is the real msb with a home of the test's own.
type realMsb struct {
	t    *testing.T
	path string
	dir  string // the test's folder: the home, the recorder's folder
	home string
}

// useRealMsb skips the test when the real msb is not named, else gives it
// a new home, whose sandboxes are stopped and removed and whose folder is
// deleted when the test ends.
func useRealMsb(t *testing.T) *realMsb {
	t.Helper()
	path := os.Getenv(envTestMsb)
	if path == "" {
		t.Skip(envTestMsb + " is not set: these tests run the real msb, which `make msb-gate` installs (bash scripts/msb.sh install) and names there")
	}
	// Short: msb puts a unix socket under its home, and such a path holds
	// at most 108 bytes.
	dir, err := os.MkdirTemp("", "rz-msb-")
	if err != nil {
		t.Fatal(err)
	}
	m := &realMsb{t: t, path: path, dir: dir, home: filepath.Join(dir, "home")}
	t.Cleanup(m.cleanup)
	return m
}

func (m *realMsb) cleanup() {
	if out, err := m.cmd("ls", "-q").Output(); err == nil {
		for _, n := range strings.Fields(string(out)) {
			_ = m.cmd("stop", "-f", n).Run()
			_ = m.cmd("rm", n).Run()
		}
	}
	if err := os.RemoveAll(m.dir); err != nil {
		m.t.Errorf("the test's msb home: %v", err)
	}
	for _, seg := range metricsSegments(m.home) {
		if err := os.Remove(seg); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.t.Errorf("msb's metrics segment of the test's home: %v", err)
		}
	}
}

// metricsSegments are the shared-memory files msb 0.6.18 makes for a home
// on its first sandbox, and never removes: /dev/shm/msb-met-<FNV-1a 64 of
// the home's path>-v<ABI> (Linux; ABI 3 and the earlier 2).
func metricsSegments(home string) []string {
	h := fnv.New64a()
	h.Write([]byte(home))
	var out []string
	for _, abi := range []int{2, 3} {
		out = append(out, fmt.Sprintf("/dev/shm/msb-met-%016x-v%d", h.Sum64(), abi))
	}
	return out
}

func (m *realMsb) cmd(args ...string) *exec.Cmd {
	c := exec.Command(m.path, args...)
	c.Env = envlist.Merge(os.Environ(), EnvHome+"="+m.home)
	return c
}

// msb runs the real msb on the test's home; an error quotes its output.
func (m *realMsb) msb(args ...string) (string, error) {
	out, err := m.cmd(args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("msb %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// driver is a Driver on the real msb and the test's home.
func (m *realMsb) driver() *Driver { return newDriver(m.t, m.path, m.home) }

// loadImage loads the busybox test image (`docker save`'s form, made here
// with no engine) into the home, as testImage.
func (m *realMsb) loadImage() string {
	m.t.Helper()
	_, archive := testimage.BusyboxArchive(m.t)
	f := filepath.Join(m.dir, "busybox.tar")
	if err := os.WriteFile(f, archive, 0o600); err != nil {
		m.t.Fatal(err)
	}
	if _, err := m.msb("load", "-q", "-i", f, "-t", testImage); err != nil {
		m.t.Fatal(err)
	}
	_ = os.Remove(f)
	return testImage
}

// stopped makes a sandbox with msb itself (`msb create`, 64 MB), with
// labels, and leaves it Stopped: where no microVM boots it stops during
// its boot; where one boots it is stopped.
func (m *realMsb) stopped(name string, labels map[string]string) {
	m.t.Helper()
	args := []string{"create", "-q", "--name", name, "-m", "64M"}
	for k, v := range labels {
		args = append(args, "--label="+k+"="+v)
	}
	_, createErr := m.msb(append(args, testImage)...)
	_, _ = m.msb("stop", name)
	if st := m.statuses()[name]; st != "Stopped" {
		m.t.Fatalf("msb create %s: status %q, not Stopped (%v)", name, st, createErr)
	}
}

// stoppedAll makes each of sandboxes (name → labels) at once.
func (m *realMsb) stoppedAll(sandboxes map[string]map[string]string) {
	m.t.Helper()
	var wg sync.WaitGroup
	failed := make(chan string, len(sandboxes))
	for name, labels := range sandboxes {
		wg.Go(func() {
			args := []string{"create", "-q", "--name", name, "-m", "64M"}
			for k, v := range labels {
				args = append(args, "--label="+k+"="+v)
			}
			_, _ = m.msb(append(args, testImage)...)
			if out, err := m.msb("stop", name); err != nil {
				failed <- out
			}
		})
	}
	wg.Wait()
	close(failed)
	for out := range failed {
		m.t.Error(out)
	}
	st := m.statuses()
	for name := range sandboxes {
		if st[name] != "Stopped" {
			m.t.Fatalf("%s: status %q, not Stopped", name, st[name])
		}
	}
}

// statuses is what `msb ls --format json` lists: name → status.
func (m *realMsb) statuses() map[string]string {
	m.t.Helper()
	out, err := m.cmd("ls", "--format", "json").Output()
	if err != nil {
		m.t.Fatalf("msb ls: %v", err)
	}
	st, err := parseLs(string(out))
	if err != nil {
		m.t.Fatal(err)
	}
	return st
}

// listed says whether each name is listed, in order.
func (m *realMsb) listed(names ...string) []bool {
	st := m.statuses()
	out := make([]bool, len(names))
	for i, n := range names {
		_, out[i] = st[n]
	}
	return out
}

// recorded is a Driver on testdata/msb-recorder, which runs the real msb
// and logs each invocation (recorderLog).
func (m *realMsb) recorded() *Driver {
	m.t.Helper()
	rec, err := filepath.Abs(filepath.Join("testdata", "msb-recorder"))
	if err != nil {
		m.t.Fatal(err)
	}
	if err := os.MkdirAll(m.home+".recorder", 0o700); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.home+".recorder", "real"), []byte(m.path+"\n"), 0o600); err != nil {
		m.t.Fatal(err)
	}
	return newDriver(m.t, rec, m.home)
}

// recorderLog is the recorder's log: one "ARGS rc=N" line per invocation.
func (m *realMsb) recorderLog() []string {
	m.t.Helper()
	b, err := os.ReadFile(filepath.Join(m.home+".recorder", "log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		m.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// runAccount is the part of `msb inspect NAME --format json` that shows
// what `msb run` made of the backend's flags.
type runAccount struct {
	Status string `json:"status"`
	Config struct {
		Labels map[string]string `json:"labels"`
		Env    []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"env"`
		Resources struct {
			MemoryMiB int `json:"memory_mib"`
		} `json:"resources"`
		Network struct {
			Ports []struct {
				GuestPort int    `json:"guest_port"`
				HostBind  string `json:"host_bind"`
				HostPort  int    `json:"host_port"`
				Protocol  string `json:"protocol"`
			} `json:"ports"`
		} `json:"network"`
		Mounts []struct {
			Type    string `json:"type"`
			Guest   string `json:"guest"`
			Host    string `json:"host"`
			Options struct {
				Nodev    bool `json:"nodev"`
				Readonly bool `json:"readonly"`
			} `json:"options"`
		} `json:"mounts"`
	} `json:"config"`
}

func TestRealVersion(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	out, err := m.msb("--version")
	if err != nil || !strings.HasPrefix(out, "msb ") {
		t.Fatalf("msb --version: %q, %v", out, err)
	}
	// A home with no database yet: msb makes one, and lists nothing.
	st, err := m.driver().list(testContext(t))
	if err != nil || len(st) != 0 {
		t.Errorf("list on a new home: %v, %v", st, err)
	}
	t.Logf("%s at %s", strings.TrimSpace(out), m.path)
}

// TestRealRunArgv: every flag the backend passes to `msb run` is one the
// real msb takes, and means what the backend meant: msb's own account of
// the sandbox (inspect) shows the labels, environment, memory, ports and
// file mount. Where no microVM boots, the create fails during the boot,
// after msb has read and stored all of it.
func TestRealRunArgv(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	img := m.loadImage()
	d := m.driver()
	ctx := testContext(t)
	const name = "rz-0a1b2c3d-1"
	sb, err := d.Create(ctx, name, backend.Spec{
		Image:         img,
		Cmd:           []string{"sh", "-c", "sleep 3600"},
		Env:           map[string]string{"B": "two words", "A": "1"},
		Ports:         []string{"8080/tcp", "53/udp"},
		MemoryLimitMB: 64,
		RunID:         testRun,
		Labels:        map[string]string{"team": "a b", "-dash": "-v"},
		Files:         []backend.File{{GuestPath: "/etc/app.conf", Content: []byte("x=1\n"), Mode: 0o600}},
	})
	if err == nil {
		t.Logf("a microVM booted: %s runs", name)
		defer sb.Stop(ctx, time.Second)
	} else {
		if !strings.Contains(err.Error(), "before the sandbox reached Running") || !strings.Contains(err.Error(), "failed to start") {
			t.Errorf("Create: %v, want msb's own words on the failed boot", err)
		}
		t.Logf("no microVM booted: %v", err)
	}
	out, err := m.msb("inspect", name, "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got runAccount
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	c := got.Config
	for k, v := range map[string]string{"team": "a b", "-dash": "-v", backend.LabelRunID: testRun, backend.LabelRunIDAlt: testRun} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels: %v)", k, c.Labels[k], v, c.Labels)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Key] = e.Value
	}
	if env["A"] != "1" || env["B"] != "two words" {
		t.Errorf("env %v, want A=1 and B=two words", env)
	}
	if c.Resources.MemoryMiB != 64 {
		t.Errorf("memory %d MiB, want 64", c.Resources.MemoryMiB)
	}
	var ports []string
	for _, p := range c.Network.Ports {
		if p.HostBind != loopback || p.HostPort <= 0 {
			t.Errorf("port %+v: not published on %s", p, loopback)
		}
		ports = append(ports, fmt.Sprintf("%d/%s", p.GuestPort, p.Protocol))
	}
	slices.Sort(ports)
	if !slices.Equal(ports, []string{"53/udp", "8080/tcp"}) {
		t.Errorf("ports %v, want 53/udp and 8080/tcp", ports)
	}
	mounted := false
	for _, mt := range c.Mounts {
		if mt.Guest == "/etc/app.conf" {
			mounted = mt.Type == "Bind" && mt.Options.Nodev && !mt.Options.Readonly && strings.HasSuffix(mt.Host, "-app.conf")
		}
	}
	if !mounted {
		t.Errorf("no read-write nodev bind of /etc/app.conf among %+v", c.Mounts)
	}
	if err := d.Remove(ctx, backend.SandboxKind, testRun, []string{name})[0]; err != nil {
		t.Fatal(err)
	}
	if m.listed(name)[0] {
		t.Error("listed after Remove")
	}
}

// envTestMsbBoots is "1" where the msb gate saw a microVM boot (scripts/msb.sh
// boot): a sandbox that does not boot then fails the test instead of
// skipping it.
const envTestMsbBoots = "RIGHTSIZE_TEST_MSB_BOOTS"

// TestRealBootedLifecycle: a sandbox that boots runs its command, is
// adopted as this process's own, and is gone after Stop. Where no microVM
// boots it is skipped, with msb's words: TestStandinLifecycle runs it
// against the stand-in.
func TestRealBootedLifecycle(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	img := m.loadImage()
	d := m.driver()
	ctx := testContext(t)
	const name = "rz-0a1b2c3d-1"
	sb, err := d.Create(ctx, name, backend.Spec{Image: img, Cmd: []string{"sh", "-c", "echo hello; exec sleep 3600"}, RunID: testRun, MemoryLimitMB: 128})
	if err != nil {
		if os.Getenv(envTestMsbBoots) == "1" {
			t.Fatalf("a microVM boots here, and this one did not: %v", err)
		}
		guest, _ := m.msb("logs", "--source", "system", name)
		_ = d.Remove(ctx, backend.SandboxKind, testRun, []string{name})
		said := firstLine(err.Error(), "failed to start")
		said = said[max(0, strings.Index(said, "error: ")):]
		t.Skipf("no microVM boots here (msb run: %s; the guest: %s): TestStandinLifecycle runs this against the stand-in",
			said, firstLine(guest, "ERROR"))
	}
	if adopted, err := d.Adopt(ctx, name); err != nil || adopted != sb {
		t.Errorf("Adopt: %v, %v; want this process's own", adopted, err)
	}
	proctest.WaitUntil(t, time.Minute, "the command's output", func() bool {
		logs, _ := sb.Logs(ctx)
		return strings.Contains(logs, "hello")
	})
	if err := sb.Stop(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if m.listed(name)[0] {
		t.Error("listed after Stop")
	}
}

// firstLine is the first line of s holding fragment, trimmed; "" when none.
func firstLine(s, fragment string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, fragment) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// TestRealCreateFailureLeavesNothing: a create the real msb fails (where no
// microVM boots; an image it does not have) leaves nothing listed, by msb
// or the ledger, and no process of this one.
func TestRealCreateFailureLeavesNothing(t *testing.T) {
	// A session that sweeps and starts no watchdog, as RIGHTSIZE_REAPER
	// asks (not in parallel: the variable is the process's).
	t.Setenv(reaper.EnvReaper, "sweep")
	m := useRealMsb(t)
	img := m.loadImage()
	d := m.driver()
	ctx := testContext(t)
	s, err := reaper.Open(ctx, d, reaper.WithCacheDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ image, want string }{
		{img, "failed to start"},
		{"local/nope:1", "image error"},
	} {
		name := s.NextName()
		var made backend.Sandbox
		_, err := s.Create(ctx, backend.SandboxKind, name, func(ctx context.Context) (string, error) {
			sb, err := d.Create(ctx, name, backend.Spec{Image: tc.image, RunID: s.RunID(), MemoryLimitMB: 64})
			if err != nil {
				return "", err
			}
			made = sb
			return sb.ID(), nil
		})
		switch {
		case err == nil && tc.image == img:
			t.Logf("a microVM booted: %s runs", name)
			if errs := s.Release(ctx, backend.SandboxKind, []string{name}); errs[0] != nil {
				t.Fatal(errs[0])
			}
			_ = made
		case err == nil:
			t.Errorf("create from %s succeeded", tc.image)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("create from %s: %v, want msb's %q", tc.image, err, tc.want)
		}
		if st := m.statuses(); len(st) != 0 {
			t.Errorf("after the create from %s msb lists %v", tc.image, st)
		}
		if l := s.Ledger().Names(backend.SandboxKind); len(l) != 0 {
			t.Errorf("after the create from %s the ledger lists %v", tc.image, l)
		}
		if len(d.live) != 0 {
			t.Errorf("the driver still holds %d attached msb run(s)", len(d.live))
		}
	}
}

// TestRealRemoveByLabel: a removal for a run takes what carries the run's
// label (either spelling), and what carries no run label at all (the other
// members' sandboxes, by the name their list holds); it leaves another
// run's and every keep-alive sandbox, and tells a name msb does not have
// (its own words: `error: sandbox not found: NAME`). CheckOwned decides
// the same and touches nothing.
func TestRealRemoveByLabel(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	m.loadImage()
	m.stoppedAll(map[string]map[string]string{
		"rz-0a1b2c3d-1":         backend.RunLabels(testRun),
		"rz-0a1b2c3d-2":         {backend.LabelRunIDAlt: testRun},
		"rz-other-1":            backend.RunLabels("99999999"),
		"rz-family-1":           nil,
		"rz-reuse-0123456789ab": {backend.LabelReuse: "0123456789ab"},
		"rz-reuse-aaaaaaaaaaaa": nil,
	})
	d := m.driver()
	ctx := testContext(t)
	names := []string{"rz-0a1b2c3d-1", "rz-0a1b2c3d-2", "rz-other-1", "rz-family-1", "rz-reuse-0123456789ab", "rz-reuse-aaaaaaaaaaaa", "rz-never-1", "bad name"}
	want := []error{nil, nil, backend.ErrNotOwned, nil, backend.ErrNotOwned, backend.ErrNotOwned, backend.ErrNotFound, ErrInvalidName}
	check := func(what string, errs []error) {
		t.Helper()
		for i, w := range want {
			if (w == nil) != (errs[i] == nil) || !errors.Is(errs[i], w) {
				t.Errorf("%s %s: %v, want %v", what, names[i], errs[i], w)
			}
		}
		if !strings.Contains(fmt.Sprint(errs[2]), "labelled for run 99999999") {
			t.Errorf("%s: another run's sandbox: %v, want it to say whose", what, errs[2])
		}
		if !strings.Contains(fmt.Sprint(errs[6]), "error: sandbox not found: rz-never-1") {
			t.Errorf("%s: a name msb does not have: %v, want msb's words", what, errs[6])
		}
	}
	check("CheckOwned", d.CheckOwned(ctx, backend.SandboxKind, testRun, names))
	if got := m.listed(names[:6]...); slices.Contains(got, false) {
		t.Fatalf("CheckOwned removed something: listed %v", got)
	}
	check("Remove", d.Remove(ctx, backend.SandboxKind, testRun, names))
	if got, want := m.listed(names[:6]...), []bool{false, false, true, false, true, true}; !slices.Equal(got, want) {
		t.Errorf("listed after Remove: %v, want %v", got, want)
	}
	if errs := d.Remove(ctx, backend.SandboxKind, "", []string{"rz-other-1"}); errs[0] == nil || !m.listed("rz-other-1")[0] {
		t.Errorf("a removal with no run id: %v", errs[0])
	}
}

// TestRealRemoveStarting: a sandbox msb is still creating (its attached
// `msb run` alive, status Starting) is adopted by no one and removed by a
// removal for its run: msb stop waits for it, rm takes it.
func TestRealRemoveStarting(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	img := m.loadImage()
	creator, other := m.driver(), m.driver()
	ctx := testContext(t)
	const name = "rz-0a1b2c3d-1"
	created := make(chan error, 1)
	go func() {
		// No memory limit: msb's default (512 MB) boots slower, a longer
		// window to find it being created in.
		_, err := creator.Create(ctx, name, backend.Spec{Image: img, RunID: testRun})
		created <- err
	}()
	var st string
	proctest.WaitUntil(t, time.Minute, "the sandbox to be listed", func() bool {
		st = m.statuses()[name]
		return st != ""
	})
	if st == statusStarting {
		if _, err := other.Adopt(ctx, name); !errors.Is(err, backend.ErrStarting) || !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("Adopt of a sandbox being created: %v, want ErrStarting and ErrNotFound", err)
		}
	} else {
		t.Logf("first seen %s, not %s: the create was not caught", st, statusStarting)
	}
	if err := other.Remove(ctx, backend.SandboxKind, testRun, []string{name})[0]; err != nil {
		t.Fatal(err)
	}
	if m.listed(name)[0] {
		t.Error("listed after Remove")
	}
	err := <-created
	t.Logf("the create ended: %v", err)
	if len(creator.live) != 0 {
		t.Error("the creator still holds the attached msb run")
	}
}

// TestRealAdoptAndLogs: a stopped sandbox is not adopted, and says why; a
// name msb does not have is not found, by Adopt and by Logs.
func TestRealAdoptAndLogs(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	m.loadImage()
	m.stopped("rz-stopped-1", backend.RunLabels(testRun))
	d := m.driver()
	ctx := testContext(t)
	if _, err := d.Adopt(ctx, "rz-stopped-1"); !errors.Is(err, backend.ErrStopped) || !errors.Is(err, backend.ErrNotFound) || !strings.Contains(err.Error(), "Stopped") {
		t.Errorf("Adopt of a stopped sandbox: %v, want ErrStopped and ErrNotFound naming its status", err)
	}
	if _, err := d.Adopt(ctx, "rz-never-1"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Adopt of an unknown name: %v, want ErrNotFound", err)
	}
	if _, err := (&sandbox{d: d, name: "rz-stopped-1"}).Logs(ctx); err != nil {
		t.Errorf("Logs of a stopped sandbox: %v", err)
	}
	if _, err := (&sandbox{d: d, name: "rz-never-1"}).Logs(ctx); !errors.Is(err, backend.ErrNotFound) || !strings.Contains(err.Error(), "error: sandbox not found: rz-never-1") {
		t.Errorf("Logs of an unknown name: %v, want ErrNotFound quoting msb", err)
	}
}

// TestRealRemoveKeepAlive: a keep-alive sandbox is removed only as the one
// its labels (or, unlabelled, its name) say it is.
func TestRealRemoveKeepAlive(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	m.loadImage()
	m.stoppedAll(map[string]map[string]string{
		"rz-reuse-799aad5a3338": {backend.LabelReuse: "799aad5a3338"},
		"rz-reuse-0123456789ab": {backend.LabelReuse: "ffffffffffff"},
		"rz-reuse-aaaaaaaaaaaa": backend.RunLabels(testRun),
		"rz-reuse-bbbbbbbbbbbb": nil,
	})
	d := m.driver()
	ctx := testContext(t)
	ka, err := d.KeepAlives(ctx)
	if err != nil || len(ka) != 4 {
		t.Errorf("KeepAlives: %+v, %v; want the 4", ka, err)
	}
	for _, tc := range []struct {
		name, hash string
		want       error
	}{
		{"rz-reuse-799aad5a3338", "799aad5a3338", nil},
		{"rz-reuse-0123456789ab", "0123456789ab", backend.ErrNotOwned},
		{"rz-reuse-aaaaaaaaaaaa", "aaaaaaaaaaaa", backend.ErrNotOwned},
		{"rz-reuse-bbbbbbbbbbbb", "bbbbbbbbbbbb", nil},
		{"rz-reuse-cccccccccccc", "cccccccccccc", backend.ErrNotFound},
		{"rz-reuse-799aad5a3338", "0123456789ab", backend.ErrNotOwned},
	} {
		err := d.RemoveKeepAlive(ctx, tc.name, tc.hash)
		if (tc.want == nil) != (err == nil) || !errors.Is(err, tc.want) {
			t.Errorf("RemoveKeepAlive(%s, %s): %v, want %v", tc.name, tc.hash, err, tc.want)
		}
	}
	if got, want := m.listed("rz-reuse-799aad5a3338", "rz-reuse-0123456789ab", "rz-reuse-aaaaaaaaaaaa", "rz-reuse-bbbbbbbbbbbb"), []bool{false, true, true, false}; !slices.Equal(got, want) {
		t.Errorf("listed: %v, want %v", got, want)
	}
}

// TestRealConcurrent: msb invocations at once race its state database,
// from a home that has none yet (its first migrations) to removals of
// sandboxes beside listings: none fails.
func TestRealConcurrent(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	d := m.driver()
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Go(func() {
			if i%2 == 0 {
				if _, err := d.list(ctx); err != nil {
					errs <- err
				}
				return
			}
			if err := d.Remove(ctx, backend.SandboxKind, testRun, []string{fmt.Sprintf("rz-none-%d", i)})[0]; !errors.Is(err, backend.ErrNotFound) {
				errs <- fmt.Errorf("remove of a missing name: %v, want ErrNotFound", err)
			}
		})
	}
	wg.Wait()

	m.loadImage()
	made := map[string]map[string]string{}
	for i := range 4 {
		made[fmt.Sprintf("rz-0a1b2c3d-%d", i+1)] = backend.RunLabels(testRun)
	}
	m.stoppedAll(made)
	for name := range made {
		wg.Go(func() {
			if err := d.Remove(ctx, backend.SandboxKind, testRun, []string{name})[0]; err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			if _, err := d.list(ctx); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := m.statuses(); len(st) != 0 {
		t.Errorf("left: %v", st)
	}
}

// dbLock holds msb's state database (SQLite, in WAL mode) as a writer in
// a transaction does: the locks a `BEGIN EXCLUSIVE` of Python's sqlite3
// was seen holding in /proc/locks, with SQLite's unix locking: a shared
// lock on the database file's shared range, and on its WAL index (-shm)
// the DMS byte and a read mark shared, the write byte exclusive.
type dbLock struct{ files []*os.File }

func lockDatabase(t *testing.T, home string) *dbLock {
	t.Helper()
	l := &dbLock{}
	t.Cleanup(l.release)
	for _, f := range []struct {
		name  string
		locks []syscall.Flock_t
	}{
		{"msb.db", []syscall.Flock_t{{Type: syscall.F_RDLCK, Start: 0x40000002, Len: 510}}},
		{"msb.db-shm", []syscall.Flock_t{
			{Type: syscall.F_RDLCK, Start: 128, Len: 1},
			{Type: syscall.F_RDLCK, Start: 124, Len: 1},
			{Type: syscall.F_WRLCK, Start: 120, Len: 1},
		}},
	} {
		file, err := os.OpenFile(filepath.Join(home, "db", f.name), os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("msb's database is not in WAL mode as seen (%v)", err)
		}
		l.files = append(l.files, file)
		for _, lk := range f.locks {
			if err := syscall.FcntlFlock(file.Fd(), syscall.F_SETLK, &lk); err != nil {
				t.Fatalf("lock msb's database: %v", err)
			}
		}
	}
	return l
}

// release lets go: closing a file drops this process's locks on it.
func (l *dbLock) release() {
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}

// TestRealDatabaseErrorRetriedOnce: while another writer holds msb's state
// database, msb gives up with its own `error: runtime error: database
// error: ... database is locked` (at once, with busy_timeout_secs 0 in the
// home's config.json, msb's setting; after about 40 s by default). The
// backend runs that invocation once more, 500 ms later, and no more: when
// the writer let go in between, the removal goes through; when it holds
// on, the removal says the sandbox may still exist, quoting msb, and it
// does.
func TestRealDatabaseErrorRetriedOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release bool
	}{{"released before the retry", true}, {"held", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := useRealMsb(t)
			m.loadImage()
			const name = "rz-0a1b2c3d-1"
			m.stopped(name, backend.RunLabels(testRun))
			if err := os.WriteFile(filepath.Join(m.home, "config.json"), []byte(`{"database":{"busy_timeout_secs":0}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			d := m.recorded()
			lock := lockDatabase(t, m.home)
			rec := m.home + ".recorder"
			released := make(chan struct{})
			if tc.release {
				if err := os.WriteFile(filepath.Join(rec, "pause"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				go func() {
					defer close(released)
					if proctest.Poll(time.Minute, func() bool { _, err := os.Stat(filepath.Join(rec, "paused")); return err == nil }) {
						lock.release()
					}
					_ = os.WriteFile(filepath.Join(rec, "go"), nil, 0o600)
				}()
			}
			err := d.Remove(testContext(t), backend.SandboxKind, testRun, []string{name})[0]
			if tc.release {
				<-released
			}
			lock.release()
			log := m.recorderLog()
			var failed []int
			for i, l := range log {
				if !strings.HasSuffix(l, " rc=0") {
					failed = append(failed, i)
				}
			}
			t.Logf("invocations: %q; outcome: %v", log, err)
			if tc.release {
				if err != nil {
					t.Fatalf("Remove: %v", err)
				}
				if len(failed) != 1 || failed[0]+1 >= len(log) || args(log[failed[0]]) != args(log[failed[0]+1]) {
					t.Errorf("want one failed invocation, then the same once more: %q", log)
				}
				if m.listed(name)[0] {
					t.Error("still listed")
				}
				return
			}
			if err == nil || errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrNotOwned) || !strings.Contains(err.Error(), "database error:") {
				t.Errorf("Remove: %v, want msb's database error, as may still exist", err)
			}
			if len(log) != 2 || len(failed) != 2 || args(log[0]) != args(log[1]) {
				t.Errorf("want the failed invocation twice, and no third nor any other: %q", log)
			}
			if !m.listed(name)[0] {
				t.Error("gone, though its removal failed")
			}
		})
	}
}

// args is a recorder log line without its exit status.
func args(line string) string { return line[:max(0, strings.LastIndex(line, " rc="))] }

// TestRealRefusedInputRunsNothing: names and images the backend refuses
// never reach msb; the longest name it allows is msb's longest too.
func TestRealRefusedInputRunsNothing(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	img := m.loadImage()
	d := m.recorded()
	ctx := testContext(t)
	for _, name := range []string{
		"", "-rf", "--help", "../../etc", "a/b", "a b", "a;rm -rf /", "$(id)", "a\nb", ".hidden", "_x",
		"é", strings.Repeat("a", 129),
		"deadbeef", // hex only, fewer than 12: the family refuses an id prefix (internal/names)
	} {
		if _, err := d.Create(ctx, name, backend.Spec{Image: img}); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Create(%q): %v, want ErrInvalidName", name, err)
		}
		if _, err := d.Adopt(ctx, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Adopt(%q): %v, want ErrInvalidName", name, err)
		}
		if err := d.Remove(ctx, backend.SandboxKind, testRun, []string{name})[0]; !errors.Is(err, ErrInvalidName) {
			t.Errorf("Remove(%q): %v, want ErrInvalidName", name, err)
		}
	}
	for _, image := range []string{"--entrypoint=/bin/sh", "-d", "busybox --privileged", "a\tb", ""} {
		if _, err := d.Create(ctx, "rz-ok-1", backend.Spec{Image: image}); err == nil {
			t.Errorf("Create with image %q succeeded", image)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Create(cancelled, "rz-late-1", backend.Spec{Image: img}); !errors.Is(err, context.Canceled) {
		t.Errorf("Create with a cancelled context: %v", err)
	}
	if log := m.recorderLog(); log != nil {
		t.Errorf("msb ran for refused input: %q", log)
	}
	long := strings.Repeat("a", 128)
	if _, err := d.Create(ctx, long, backend.Spec{Image: img, RunID: testRun, MemoryLimitMB: 64}); err != nil && strings.Contains(err.Error(), "name") && !strings.Contains(err.Error(), "failed to start") {
		t.Errorf("msb refused a 128-byte name: %v", err)
	}
	if err := d.Remove(ctx, backend.SandboxKind, testRun, []string{long})[0]; err != nil {
		t.Errorf("128-byte name: %v", err)
	}
}

// TestRealOpen: msb is found as the rest of the family finds it, MSB_PATH
// first (a path with spaces is one word), then PATH, where a user's
// `npm install -g microsandbox` puts the umbrella package's node shim;
// MSB_HOME is the driver's endpoint, and every msb it runs uses it.
func TestRealOpen(t *testing.T) {
	m := useRealMsb(t)
	ctx := testContext(t)
	t.Setenv(EnvHome, "")

	t.Setenv(EnvPath, m.path)
	d, err := open()
	if err != nil || d.MsbPath() != m.path {
		t.Fatalf("MSB_PATH=%s: %v, %v", m.path, d, err)
	}
	if d.Endpoint() != "" || !d.DefaultEndpoint() {
		t.Errorf("no MSB_HOME: endpoint %q, default %v; want msb's default home", d.Endpoint(), d.DefaultEndpoint())
	}

	spaced := filepath.Join(m.dir, "Application Support", "micro sandbox")
	if err := os.MkdirAll(spaced, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(spaced, "msb")
	if err := os.Symlink(m.path, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvPath, link)
	t.Setenv(EnvHome, m.home)
	t.Setenv(backend.EnvBackend, "microsandbox")
	r, err := backend.Resolve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d = r.(*Driver)
	if d.MsbPath() != link || d.Endpoint() != EnvHome+"="+m.home || d.DefaultEndpoint() {
		t.Errorf("resolved %q on %q (default %v), want %q on %s=%s", d.MsbPath(), d.Endpoint(), d.DefaultEndpoint(), link, EnvHome, m.home)
	}
	// The home is the driver's from now on, whatever the environment says.
	t.Setenv(EnvHome, filepath.Join(m.dir, "elsewhere"))
	if _, err := d.list(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.home, "db")); err != nil {
		t.Errorf("msb did not use the driver's home: %v", err)
	}
	if _, err := os.Stat(filepath.Join(m.dir, "elsewhere")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("msb used the environment's home: %v", err)
	}
	t.Setenv(EnvHome, m.home)

	bin := filepath.Join(m.dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(m.path, filepath.Join(bin, "msb")); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvPath, "")
	t.Setenv("PATH", bin)
	if d, err := open(); err != nil || d.MsbPath() != filepath.Join(bin, "msb") {
		t.Errorf("msb on PATH: %v, %v", d, err)
	}

	// The umbrella package's shim, beside the platform package that holds
	// the binary (scripts/msb.sh installs both, as npm does).
	shim := filepath.Join(filepath.Dir(m.path), "..", "..", "..", ".bin", "msb")
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(shim); err != nil || nodeErr != nil {
		t.Logf("no umbrella shim here (%v; node: %v): its row is skipped", err, nodeErr)
		return
	}
	t.Setenv("PATH", filepath.Dir(shim)+string(os.PathListSeparator)+filepath.Dir(node))
	d, err = open()
	if err != nil || d.MsbPath() != shim {
		t.Fatalf("the shim on PATH: %v, %v", d, err)
	}
	if _, err := d.list(ctx); err != nil {
		t.Errorf("list through the shim: %v", err)
	}
	if err := d.Remove(ctx, backend.SandboxKind, testRun, []string{"rz-never-1"})[0]; !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("remove of a missing name through the shim: %v, want ErrNotFound", err)
	}
}
