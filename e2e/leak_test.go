//go:build linux

package e2e_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The leak check of Main: a package whose plain testcontainers-go test
// leaves a container and a network running fails, with both listed, and
// they are removed all the same; the same package stopping them passes.
func TestLeakCheck(t *testing.T) {
	t.Parallel()
	r := newBareRig(t)
	bin := filepath.Join(t.TempDir(), "leakfixture.test")
	if out, err := exec.Command(goTool(t), "test", "-c", "-o", bin, "./leakfixture").CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./leakfixture: %v\n%s", err, out)
	}
	run := func(t *testing.T, mode string) (string, string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "-test.v", "-test.timeout=2m")
		cmd.Env = append(os.Environ(), "RZ_LEAK_FIXTURE="+mode, "RZ_FIXTURE_IMAGE="+r.img,
			"RIGHTSIZE_CACHE_DIR="+r.cache, "TMPDIR="+shortDir(t))
		b, err := cmd.CombinedOutput()
		out := string(b)
		m := regexp.MustCompile(`fixture: run=(\S+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("the fixture said no run: %v\n%s", err, out)
		}
		left, lerr := r.eng.RunLeft(t.Context(), m[1], nil)
		if lerr != nil || left != "" {
			t.Errorf("after the fixture, run %s left %s (%v)", m[1], left, lerr)
		}
		return out, m[1], err
	}
	t.Run("a leak fails the package", func(t *testing.T) {
		out, id, err := run(t, "leak")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("the fixture ended %v, want exit status 1:\n%s", err, out)
		}
		if !strings.Contains(out, "--- PASS: TestPlainTestcontainers") {
			t.Errorf("the test itself should pass; only the leak check fails:\n%s", out)
		}
		i := strings.Index(out, "sandboxtest: leak check: the tests left these of run "+id)
		if i < 0 {
			t.Fatalf("no leak check report:\n%s", out)
		}
		report := out[i:]
		if !regexp.MustCompile(`\n    sandbox \S+ \([0-9a-f]{12}\)`).MatchString(report) || !regexp.MustCompile(`\n    network \S+ \([0-9a-f]{12}\)`).MatchString(report) {
			t.Errorf("the report does not list the container and the network:\n%s", report)
		}
		// GuardAll's creates came from the test's calls of
		// testcontainers-go: the list names the test and its line.
		for _, k := range []string{"sandbox", "network"} {
			if !regexp.MustCompile(`\n    ` + k + ` \S+ \([0-9a-f]{12}\), left by TestPlainTestcontainers at fixture_test\.go:\d+`).MatchString(report) {
				t.Errorf("the report does not say which test left the %s:\n%s", k, report)
			}
		}
		t.Logf("%s", strings.TrimSpace(report))
	})
	t.Run("a stopped auto-remove container is not a leak", func(t *testing.T) {
		// Its last step stops a --rm container: the engine's removal of
		// it is still under way when the tests end.
		out, _, err := run(t, "autoremove")
		if err != nil {
			t.Fatalf("the fixture failed: %v\n%s", err, out)
		}
		if strings.Contains(out, "leak check") {
			t.Errorf("a container on its way out was reported as a leak:\n%s", out)
		}
	})
	t.Run("a clean suite passes", func(t *testing.T) {
		out, _, err := run(t, "clean")
		if err != nil {
			t.Fatalf("the fixture failed: %v\n%s", err, out)
		}
		if strings.Contains(out, "leak check") {
			t.Errorf("a clean suite got a leak report:\n%s", out)
		}
	})
}
