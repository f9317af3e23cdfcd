//go:build unix

package msb

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/usermod"
)

// The crash rows on the real msb: an owner process (this test binary
// re-executed as TestMsbHelper) with a sandbox of its run that stopped and
// one it is creating, SIGKILLed; then the watchdog, or, with the watchdog
// killed too, the next process's sweep, removes what is the run's, by its
// label or, unlabelled, by the name its list holds, and nothing else.

// The environment the owner is steered with.
const (
	envOwnerImage  = "RZ_MSB_IMAGE"
	envOwnerListed = "RZ_MSB_LISTED" // names its list holds beside its own, comma-separated
)

// TestMsbHelper is the helper process's entry point; it does nothing in an
// ordinary run.
func TestMsbHelper(t *testing.T) {
	switch role := os.Getenv(envHelperRole); role {
	case "":
		t.Skip("the helper process of the tests that re-execute this binary")
	case "owner":
		owner(t)
	default:
		t.Fatalf("no helper role %q", role)
	}
}

// owner opens msb and a session as a test process does (MSB_PATH,
// MSB_HOME, RIGHTSIZE_CACHE_DIR, RIGHTSIZE_REAPER from its environment),
// then: a sandbox of its run made and stopped (by msb itself, labelled as
// the driver labels it: where no microVM boots, every one stops), the
// names of envOwnerListed in its list, and a sandbox it is creating when
// it is killed. It says run, watchdog, stopped and starting, then blocks.
func owner(t *testing.T) {
	ctx := context.Background()
	d, err := open()
	if err != nil {
		t.Fatal(err)
	}
	s, err := reaper.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	image := os.Getenv(envOwnerImage)
	stopped := s.NextName()
	if _, err := s.Admit(backend.SandboxKind, stopped); err != nil {
		t.Fatal(err)
	}
	args := []string{"create", "-q", "--name", stopped, "-m", "64M"}
	for k, v := range backend.RunLabels(s.RunID()) {
		args = append(args, "--label="+k+"="+v)
	}
	_ = d.command(ctx, append(args, image)...).Run()
	_ = d.command(ctx, "stop", stopped).Run()
	for _, n := range strings.Split(os.Getenv(envOwnerListed), ",") {
		if n == "" {
			continue
		}
		if _, err := s.Admit(backend.SandboxKind, n); err != nil {
			t.Fatal(err)
		}
	}
	proctest.Say("run", s.RunID())
	wd := 0
	if w := s.Watchdog(); w != nil {
		wd = w.PID
	}
	proctest.Say("watchdog", strconv.Itoa(wd))
	proctest.Say("stopped", stopped)
	starting := s.NextName()
	proctest.Say("starting", starting)
	go func() {
		// No memory limit: msb's default (512 MB) takes longer to boot, a
		// longer window to be killed in.
		_, err := s.Create(ctx, backend.SandboxKind, starting, func(ctx context.Context) (string, error) {
			sb, err := d.Create(ctx, starting, backend.Spec{Image: image, Cmd: []string{"sleep", "3600"}, RunID: s.RunID()})
			if err != nil {
				return "", err
			}
			return sb.ID(), nil
		})
		proctest.Say("created", strconv.Quote(strings.ReplaceAll(errString(err), "\n", " ")))
	}()
	proctest.Block()
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// startOwner starts the owner on the test's msb and home, with cache as its
// cache dir and env added, and returns it once it has said everything but
// created, and the sandbox it is creating is listed.
func (m *realMsb) startOwner(t *testing.T, cache string, env ...string) (*proctest.Helper, map[string]string) {
	t.Helper()
	h := proctest.StartHelper(t, proctest.Spec{
		Name: "owner",
		Argv: proctest.TestArgv("TestMsbHelper", "-test.timeout=5m"),
		Env: proctest.Environ(
			func(k string) bool { return strings.HasPrefix(k, "RIGHTSIZE_") || strings.HasPrefix(k, "MSB_") },
			append([]string{envHelperRole + "=owner", ledger.EnvCacheDir + "=" + cache, EnvPath + "=" + m.path, EnvHome + "=" + m.home,
				backend.EnvBackend + "=" + backend.Msb, envOwnerImage + "=" + testImage}, env...)...),
	})
	h.Within = 2 * time.Minute
	said := map[string]string{}
	for _, k := range []string{"run", "watchdog", "stopped", "starting"} {
		said[k] = h.Expect(k)
	}
	proctest.WaitUntil(t, time.Minute, "the owner's create to be listed", func() bool { return m.listed(said["starting"])[0] })
	if v, ok := h.Value("created"); ok {
		t.Fatalf("the owner's create ended before it could be killed in the middle of it: %s", v)
	}
	return h, said
}

func TestRealWatchdogAfterSIGKILL(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	m.loadImage()
	cache := t.TempDir()
	// Another run's sandbox the owner's list names (a name that changed
	// hands), and one it does not name.
	m.stoppedAll(map[string]map[string]string{
		"rz-taken-1":     backend.RunLabels("99999999"),
		"rz-bystander-1": backend.RunLabels("99999999"),
	})
	h, said := m.startOwner(t, cache, envOwnerListed+"=rz-taken-1")
	if said["watchdog"] == "0" {
		t.Fatal("the owner has no watchdog")
	}
	h.KillAndWait()
	killed := time.Now()
	runs := filepath.Join(cache, ledger.RunsDir)
	proctest.WaitUntil(t, 2*time.Minute, "the watchdog to remove the run's sandboxes and files", func() bool {
		l := m.listed(said["stopped"], said["starting"])
		return !l[0] && !l[1] && !ledger.HasFiles(runs, said["run"])
	})
	t.Logf("SIGKILL of the owner while msb created its sandbox → its 2 sandboxes (one stopped, one being created) and its files gone in %s", time.Since(killed).Round(time.Millisecond))
	if got := m.listed("rz-taken-1", "rz-bystander-1"); slices.Contains(got, false) {
		t.Errorf("another run's sandboxes were removed: listed %v", got)
	}
}

func TestRealSweepAfterOwnerAndWatchdogDie(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	m.loadImage()
	cache := t.TempDir()
	// Beside the run's own: another run's, one a member of the family made
	// (no label), a keep-alive; all named by the run's list, with a name
	// msb never had.
	m.stoppedAll(map[string]map[string]string{
		"rz-taken-1":            backend.RunLabels("99999999"),
		"rz-family-1":           nil,
		"rz-reuse-0123456789ab": {backend.LabelReuse: "0123456789ab"},
	})
	h, said := m.startOwner(t, cache, envOwnerListed+"=rz-taken-1,rz-family-1,rz-reuse-0123456789ab,rz-never-1")
	wd, err := strconv.Atoi(said["watchdog"])
	if err != nil || wd <= 0 {
		t.Fatalf("the owner has no watchdog (%q)", said["watchdog"])
	}
	if err := syscall.Kill(wd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.KillAndWait()
	// The watchdog, the owner's child, is reaped once reparented: until
	// then its pid exists, and a sweep takes it to be at work.
	proctest.WaitUntil(t, time.Minute, "the killed watchdog to be gone", func() bool { return syscall.Kill(wd, 0) == syscall.ESRCH })
	runs := filepath.Join(cache, ledger.RunsDir)
	if !ledger.HasFiles(runs, said["run"]) {
		t.Fatal("the run's files are gone with no one left to remove them")
	}

	rep, err := reaper.Sweep(testContext(t), m.driver(), reaper.WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	var rr *reaper.RunReport
	for i := range rep.Runs {
		if rep.Runs[i].ID == said["run"] {
			rr = &rep.Runs[i]
		}
	}
	if rr == nil || rr.Decision != reaper.Reaped {
		t.Fatalf("the sweep's decision on the dead run: %+v", rr)
	}
	t.Logf("the sweep: %s (%s); removed %v; not the run's %v; kept %v", rr.Decision, rr.Reason, rr.Removed, rr.NotOwned, rr.Kept)
	names := []string{said["stopped"], said["starting"], "rz-family-1", "rz-taken-1", "rz-reuse-0123456789ab"}
	if got, want := m.listed(names...), []bool{false, false, false, true, true}; !slices.Equal(got, want) {
		t.Errorf("listed %v: %v, want %v", names, got, want)
	}
	if ledger.HasFiles(runs, said["run"]) {
		t.Error("the run's files stay")
	}
}

// TestRealUserTestKilled: a user's test binary (internal/usermod: a
// module of its own, importing only sandboxtest, no TestMain), on msb
// (RIGHTSIZE_BACKEND=msb), SIGKILLed while msb creates its sandbox: its
// watchdog removes the sandbox and the run's files.
func TestRealUserTestKilled(t *testing.T) {
	t.Parallel()
	m := useRealMsb(t)
	img := m.loadImage()
	bin := usermod.Build(t, usermod.Store)
	cache := t.TempDir()
	h := proctest.StartHelper(t, proctest.Spec{
		Name: "user's test",
		Argv: []string{bin, "-test.run=^TestHolds$", "-test.v", "-test.timeout=5m"},
		Env: proctest.Environ(
			func(k string) bool {
				return strings.HasPrefix(k, "RIGHTSIZE_") || strings.HasPrefix(k, "MSB_") || strings.HasPrefix(k, "USER_")
			},
			ledger.EnvCacheDir+"="+cache, EnvPath+"="+m.path, EnvHome+"="+m.home, backend.EnvBackend+"="+backend.Msb,
			usermod.EnvImage+"="+img, usermod.EnvCmd+"=sleep 3600", usermod.EnvSandboxes+"=1", usermod.EnvNetwork+"=0",
			usermod.EnvInfo+"="+filepath.Join(t.TempDir(), "info")),
	})
	h.Within = 2 * time.Minute
	var name string
	proctest.WaitUntil(t, time.Minute, "the user's test's sandbox to be listed", func() bool {
		for n := range m.statuses() {
			name = n
		}
		return name != ""
	})
	h.KillAndWait()
	killed := time.Now()
	runs := filepath.Join(cache, ledger.RunsDir)
	proctest.WaitUntil(t, 2*time.Minute, "the watchdog to remove the sandbox and the run's files", func() bool {
		entries, _ := os.ReadDir(runs)
		return !m.listed(name)[0] && len(entries) == 0
	})
	t.Logf("SIGKILL of a user's test while msb created %s → it and the run's files gone in %s", name, time.Since(killed).Round(time.Millisecond))
}
