package sandboxtest_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// helperProcessAlone starts a local process where no engine answers, and,
// where perl is, one that writes its title over its environment (and so
// over its mark); says their pids once that is done, and blocks.
func helperProcessAlone(t *testing.T) {
	p := sandboxtest.StartProcess(t, exec.Command("sleep", "1000"))
	if _, err := exec.LookPath("perl"); err == nil {
		l := sandboxtest.StartProcess(t, exec.Command("perl", "-e", `$0 = "x" x 4096; sleep 1000`))
		environ := "/proc/" + strconv.Itoa(l.Pid()) + "/environ"
		proctest.WaitUntil(t, time.Minute, "perl's title over its environment", func() bool {
			b, err := os.ReadFile(environ)
			return err == nil && !strings.Contains(string(b), proctree.EnvMark)
		})
		proctest.Say("lost", strconv.Itoa(l.Pid()))
	}
	proctest.Say("pid", strconv.Itoa(p.Pid()))
	proctest.Block()
}

// helperProcessExecs starts a local process tree whose every process execs
// itself over and over (the script in RZ_TEST_REEXEC), where no engine
// answers; says the run once most of the tree is up, and blocks.
func helperProcessExecs(t *testing.T) {
	reexec := os.Getenv("RZ_TEST_REEXEC")
	tree := "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25; do /bin/sh " + reexec + " 1000000 & done; exec /bin/sh " + reexec + " 1000000"
	p := sandboxtest.StartProcess(t, exec.Command("/bin/sh", "-c", tree))
	// The run is the first field of the command's mark (no engine
	// answers Session here); a read that falls in an exec is empty.
	var run string
	proctest.WaitUntil(t, time.Minute, "the command's mark", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/environ")
		for kv := range strings.SplitSeq(string(b), "\x00") {
			if m, ok := strings.CutPrefix(kv, proctree.EnvMark+"="); ok {
				run, _, _ = strings.Cut(m, ".")
			}
		}
		return run != ""
	})
	// Some reads of a mark fall in an exec: most of the tree is enough.
	proctest.WaitUntil(t, time.Minute, "the tree", func() bool { return len(proctree.Live(proctree.OfRun(run))) >= 20 })
	proctest.Say("run", run)
	proctest.Block()
}
