package sandboxtest_test

import (
	"os/exec"
	"strconv"
	"testing"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// helperProcessAlone starts a local process where no engine answers, says
// its pid, and blocks.
func helperProcessAlone(t *testing.T) {
	p := sandboxtest.StartProcess(t, exec.Command("sleep", "1000"))
	proctest.Say("pid", strconv.Itoa(p.Pid()))
	proctest.Block()
}
