//go:build linux

package e2e_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
)

// fixturePkg is the package rows 2 and 4 run with `go test`, from this
// directory.
const fixturePkg = "./testdata/timeoutfixture"

// goTool finds the go command: `go test` puts GOROOT/bin on the PATH of
// the test binaries it runs.
func goTool(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	for _, p := range []string{filepath.Join(os.Getenv("GOROOT"), "bin", "go"), "/usr/local/go/bin/go"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no go command to run the fixture package with")
	return ""
}

var warm struct {
	once sync.Once
	err  error
	out  []byte
	took time.Duration
}

// warmFixture builds the fixture once (running no test), so that the rows
// that run it measure the run and not a cold build, and do not build it
// twice at once.
func warmFixture(t testing.TB, goBin string) {
	t.Helper()
	warm.once.Do(func() {
		start := time.Now()
		cmd := exec.Command(goBin, "test", "-count=1", "-run=^$", fixturePkg)
		warm.out, warm.err = cmd.CombinedOutput()
		warm.took = time.Since(start)
	})
	if warm.err != nil {
		t.Fatalf("go test -run=^$ %s: %v\n%s", fixturePkg, warm.err, warm.out)
	}
	t.Logf("fixture built (once, in %s)", ms(warm.took))
}

// fixtureProc is a `go test` of the fixture.
type fixtureProc struct {
	cmd  *exec.Cmd
	info string
	out  bytes.Buffer // written only by exec's copying goroutine
	done chan struct{}
	err  error
}

// runFixture starts `go test -count=1 args... fixturePkg` in the rig's
// cache dir, in a process group of its own when setpgid.
func (r *rig) runFixture(goBin string, setpgid bool, args ...string) *fixtureProc {
	r.t.Helper()
	info := filepath.Join(r.t.TempDir(), "info")
	argv := append(append([]string{"test", "-count=1"}, args...), fixturePkg)
	f := &fixtureProc{cmd: exec.Command(goBin, argv...), info: info, done: make(chan struct{})}
	f.cmd.Env = harness.OwnerEnv(os.Environ(), r.cache, harness.Plan{}, r.ownerEnv("RZ_FIXTURE_IMAGE="+r.img, "RZ_FIXTURE_INFO="+info)...)
	f.cmd.Stdout, f.cmd.Stderr = &f.out, &f.out
	if setpgid {
		f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := f.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() { f.err = f.cmd.Wait(); close(f.done) }()
	r.t.Cleanup(func() {
		select {
		case <-f.done:
		default:
			_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
			_ = f.cmd.Process.Kill()
			<-f.done
		}
	})
	return f
}

// wait waits for the go command to end; false after timeout.
func (f *fixtureProc) wait(timeout time.Duration) bool {
	select {
	case <-f.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// output is what go test printed; call it once the command ended.
func (f *fixtureProc) output() string {
	select {
	case <-f.done:
		return f.out.String()
	default:
		return "(go test still runs)"
	}
}

// said reads the fixture's info file: every value of each key.
func (f *fixtureProc) said() map[string][]string {
	b, _ := os.ReadFile(f.info)
	m := map[string][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = append(m[k], v)
		}
	}
	return m
}

func (f *fixtureProc) first(key string) string {
	if v := f.said()[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// asOwner is the fixture's run as an owner, for the rig's checks.
func (r *rig) asOwner(name string, f *fixtureProc) *owner {
	m := f.said()
	o := &owner{name: name, r: r, eng: r.eng, output: f.output, sandboxes: m["sandbox"], networks: m["network"]}
	if v := m["run"]; len(v) > 0 {
		o.run = v[0]
	}
	r.t.Cleanup(o.cleanup)
	return o
}
