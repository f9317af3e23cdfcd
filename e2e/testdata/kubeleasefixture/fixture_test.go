package kubeleasefixture_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"

	_ "github.com/rightsize/rightsize-go/backend/kubernetes"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The environment e2e steers the fixture with.
const (
	envImage = "RZ_FIXTURE_IMAGE"
	// envInfo is a folder: the test writes a file per step there (first,
	// second: a pod's name), and waits for e2e's (lease-deleted, checked).
	envInfo = "RZ_FIXTURE_INFO"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

// TestHeldThroughALostLease starts a pod, and another once e2e has
// deleted the run's Lease; its end stops both.
func TestHeldThroughALostLease(t *testing.T) {
	img, dir := os.Getenv(envImage), os.Getenv(envInfo)
	if img == "" || dir == "" {
		t.Skip(envImage + " or " + envInfo + " is not set: this fixture is run by e2e")
	}
	spec := sandboxtest.Spec{Image: img, Cmd: []string{"/server"}, WaitingFor: wait.ForLog("ready")}
	first := sandboxtest.Start(t, spec)
	say(t, dir, "first", first.Name())
	await(t, dir, "lease-deleted")
	second := sandboxtest.Start(t, spec)
	say(t, dir, "second", second.Name())
	await(t, dir, "checked")
}

func say(t *testing.T, dir, step, v string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+step)
	if err := os.WriteFile(tmp, []byte(v), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, step)); err != nil {
		t.Fatal(err)
	}
}

// await polls for e2e's file of step, for as long as e2e may take.
func await(t *testing.T, dir, step string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, step)); err == nil {
			return
		}
	}
	t.Fatalf("e2e did not say %s within 5 minutes", step)
}
