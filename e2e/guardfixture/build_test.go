package guardfixture_test

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/rightsize/rightsize-go/internal/testimage"
)

// TestBuildOne builds one image through the Docker client (under
// GuardAll, through its proxy: the build is in the run's ledger before
// the engine makes it), FROM the test image with the fixture's label and
// tagged envImageTag; says the run and the image's id; then blocks until
// stdin closes. The benchmark's image figure (e2e/bench -figures image)
// kills it and times the image's removal.
func TestBuildOne(t *testing.T) {
	img, tag, imgTag := os.Getenv(envImage), os.Getenv(envTag), os.Getenv(envImageTag)
	if os.Getenv(envFixture) == "" || img == "" || imgTag == "" {
		t.Skip(envFixture + " is not set: this fixture is run by e2e/bench")
	}
	ctx := context.Background()
	cli := openRun(t, ctx)
	id, err := testimage.BuildDockerfile(ctx, cli, "FROM "+img+"\nLABEL "+tagLabel+"="+tag+"\n", imgTag, nil)
	if err != nil {
		t.Fatal(err)
	}
	say("image", id)
	say("ready", "1")
	io.Copy(io.Discard, os.Stdin)
}
