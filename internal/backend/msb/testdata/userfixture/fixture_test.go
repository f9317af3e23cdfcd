// Package userfixture is a user's test on the msb backend, which the msb
// backend's tests build with `go test -c` (never `go test ./...`: testdata
// is skipped there), run with RIGHTSIZE_BACKEND=msb, and SIGKILL while msb
// creates its sandbox. It imports only the public package sandboxtest, as
// the README says.
package userfixture_test

import (
	"os"
	"testing"

	"github.com/rightsize/rightsize-go/sandboxtest"
)

func TestStartsAnMsbSandbox(t *testing.T) {
	img := os.Getenv("RZ_FIXTURE_IMAGE")
	if img == "" {
		t.Skip("RZ_FIXTURE_IMAGE is not set: this fixture is run by the msb backend's tests")
	}
	g := sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{"sleep", "3600"}})
	t.Logf("%s runs", g.Name())
	select {} // killed
}
