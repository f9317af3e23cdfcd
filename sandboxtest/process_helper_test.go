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
