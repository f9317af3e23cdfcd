//go:build linux

package e2e_test

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// Row "pkill": a CI step or a harness that ends the leftover test binaries by
// their command line (`pkill -f '\.test$'`), run while the owner dies and
// again and again while its watchdog reaps, ends no watchdog: the waiting
// one names no test binary, and the one at work shows itself as
// `rightsize-watchdog reaping <run>` (not as the test binary it runs). The
// owner is this binary under a name of the row's own, and the pattern is
// that name's, so that the row's pkill reaches nothing of anyone else.
func TestRowPkillTestBinaries(t *testing.T) {
	pkill, err := exec.LookPath("pkill")
	if err != nil {
		t.Skip("no pkill(1) here")
	}
	t.Parallel()
	r := newRig(t)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "rz"+hex.EncodeToString(b[:])+".test")
	copyExecutable(t, bin)
	pattern := regexp.QuoteMeta(filepath.Base(bin)) + "$" // '\.test$', for this row's binary alone
	o := r.startWith("owner under the row's name", harness.Plan{Containers: 2, Networks: 1}, func(s *proctest.Spec) {
		s.Argv[0] = bin
	}).ready()
	if o.watchdog <= 0 {
		t.Fatalf("the owner has no watchdog: %s", o.Output())
	}

	var mu sync.Mutex
	var ended []string // what the row's pkill reported ending
	kill := func() {
		out, _ := exec.Command(pkill, "-e", "-f", pattern).CombinedOutput() // exit 1: nothing matched
		if s := strings.TrimSpace(string(out)); s != "" {
			mu.Lock()
			ended = append(ended, s)
			mu.Unlock()
		}
	}
	kill() // while the owner lives: its watchdog waits
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			kill()
			time.Sleep(5 * time.Millisecond) // pacing the harness, not a synchronisation
		}
	}()
	defer func() { close(stop); <-done }()
	o.kill()

	// The same process, once it runs the binary: its command line says what
	// it is until it exits.
	exe := "/proc/" + strconv.Itoa(o.watchdog) + "/exe"
	var title string
	poll(t, goneWithin, "the watchdog to say what it is while it reaps", func() (bool, string) {
		p, err := os.Readlink(exe)
		if err != nil {
			return true, "" // gone: judged below
		}
		if strings.TrimSuffix(p, " (deleted)") != bin {
			return false, "it runs " + p
		}
		c, err := os.ReadFile("/proc/" + strconv.Itoa(o.watchdog) + "/cmdline")
		if err != nil {
			return true, ""
		}
		title = strings.TrimRight(strings.ReplaceAll(string(c), "\x00", " "), " ")
		return strings.HasPrefix(title, "rightsize-watchdog reaping "+o.run), "its command line is " + title
	})
	if title != "rightsize-watchdog reaping "+o.run {
		t.Errorf("while it reaped, the watchdog's command line was %q, want %q", title, "rightsize-watchdog reaping "+o.run)
	}
	r.waitGone(o, "the watchdog, with `pkill -f "+pattern+"` run throughout")
	mu.Lock()
	defer mu.Unlock()
	if len(ended) > 0 {
		t.Errorf("the row's pkill ended %q: a watchdog looked like a test binary", ended)
	}
	t.Logf("SIGKILL of the owner, `pkill -f %s` every few ms: the run is gone, the reaping watchdog said %q", pattern, title)
}

// copyExecutable copies this test binary to path.
func copyExecutable(t *testing.T, path string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
