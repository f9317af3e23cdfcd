package sandboxtest_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

func init() { helperRoles["track-first"] = helperTrackFirst }

// helperTrackFirst starts its first sandbox through Track, on the line
// the test below looks for in the log.
func helperTrackFirst(t *testing.T) {
	ctr, err := testcontainers.Run(t.Context(), os.Getenv("RZ_TEST_IMAGE"),
		testcontainers.WithCmd("sleep", "300"),
		sandboxtest.Track(t), // trackLogLine
	)
	if err != nil {
		t.Fatal(err)
	}
	in, err := ctr.Inspect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	proctest.Say("name", strings.TrimPrefix(in.Name, "/"))
}

// What the first sandbox logs of the watchdog points at the test's line,
// not at the library's own file, for a container started through Track
// too (testcontainers-go, not the test, calls its customizer).
func TestTrackLogsAtTheTestsLine(t *testing.T) {
	img := testimage.Busybox(t)
	r := newRig(t)
	h := startHelperArgs(t, "track-first", t.TempDir(), []string{"-test.v"}, "RZ_TEST_IMAGE="+img, "TESTCONTAINERS_RYUK_DISABLED=true")
	name := h.Expect("name")
	t.Cleanup(func() { r.remove(name) })
	h.Finish()
	re := regexp.MustCompile(`(\S+\.go):\d+: sandboxtest: run \S+, \S+ watchdog pid \d+`)
	m := re.FindStringSubmatch(h.Output())
	if m == nil {
		t.Fatalf("no line on the watchdog in the helper's log:\n%s", h.Output())
	}
	if m[1] != "tracklog_test.go" {
		t.Errorf("the watchdog's line is attributed to %s, want the test's file tracklog_test.go: %q", m[1], m[0])
	}
}
