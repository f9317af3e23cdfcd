package sandboxtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/envlist"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// Where Ryuk cannot start (its image absent and no registry to pull it
// from, as in air-gapped CI) and the user said nothing of it, Start still
// works at once: Ryuk is turned off for the process, which says so once.
// Without that, testcontainers-go waits a minute for Ryuk, then fails
// every create.
func TestStartWhereRyukCannotStart(t *testing.T) {
	img := testimage.Busybox(t)
	r := newRig(t)
	if _, ok := r.inspectImage("testcontainers/ryuk:0.14.0"); ok {
		t.Skip("Ryuk's image is on this engine: Ryuk can start here")
	}
	home := t.TempDir() // no ~/.testcontainers.properties
	env := envlist.Without(os.Environ(), func(k string) bool {
		return strings.HasPrefix(k, "RIGHTSIZE_") || strings.HasPrefix(k, "TESTCONTAINERS_")
	})
	cache := filepath.Join(t.TempDir(), "cache")
	start := func(name string) *proctest.Helper {
		h := proctest.StartHelper(t, proctest.Spec{
			Name: name,
			Argv: proctest.TestArgv("TestGuardHelper", "-test.timeout=3m"),
			Env: envlist.Merge(env, envHelperRole+"=first-start", "RIGHTSIZE_TEST_KEEP_ENV=1", "HOME="+home,
				ledger.EnvCacheDir+"="+cache, "RIGHTSIZE_REAPER=sweep", "RZ_TEST_IMAGE="+img),
		})
		h.Within = 2 * time.Minute
		return h
	}
	h := start("helper without a Ryuk setting")
	took, err := time.ParseDuration(h.Expect("took"))
	if err != nil {
		t.Fatal(err)
	}
	name := h.Expect("name")
	t.Cleanup(func() { r.remove(name) })
	t.Logf("first Start with Ryuk's image missing: %s", took.Round(time.Millisecond))
	if took > 30*time.Second {
		t.Errorf("the first Start took %s: it waited for Ryuk", took)
	}
	h.KillAndWait()
	if !strings.Contains(h.Stderr(), "Ryuk cannot start here") || !strings.Contains(h.Stderr(), "turned off for this process") {
		t.Errorf("the process did not say Ryuk was turned off:\n%s", h.Stderr())
	}

	// The next test binary on the host (the next package of `go test
	// ./...`) does the same, silently: the note is said once per host.
	h2 := start("second helper without a Ryuk setting")
	name2 := h2.Expect("name")
	t.Cleanup(func() { r.remove(name2) })
	h2.KillAndWait()
	if strings.Contains(h2.Stderr(), "Ryuk cannot start here") {
		t.Errorf("a second process on the host said the Ryuk note again:\n%s", h2.Stderr())
	}
}
