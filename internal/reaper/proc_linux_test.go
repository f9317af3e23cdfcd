package reaper_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// The tests that need a process to die, or two processes to race, run this
// test binary again as a helper: `-test.run=^TestXHelper$` with envRole
// set. A helper says what the test needs to know with proctest.Say.

const envRole = "RZ_REAPER_TEST_ROLE"

type helperOpts struct {
	env     []string
	setpgid bool // a process group of its own, so the test can signal it whole
}

// startHelper runs the test named test (a TestXHelper) as a helper, in
// cache, with role set. It is killed (with setpgid, its whole group) when
// the test ends.
func startHelper(t *testing.T, test, role, cache string, o helperOpts) *proctest.Helper {
	t.Helper()
	return proctest.StartHelper(t, proctest.Spec{
		Name: "helper " + role,
		Argv: proctest.TestArgv(test, "-test.timeout=3m"),
		Env: proctest.Environ(
			func(k string) bool { return strings.HasPrefix(k, "RIGHTSIZE_") || strings.HasPrefix(k, "RZ_") },
			append([]string{envRole + "=" + role, ledger.EnvCacheDir + "=" + cache}, o.env...)...),
		Dir:     t.TempDir(),
		Setpgid: o.setpgid,
	})
}

// role is this process's role when it runs as a helper: "" otherwise.
func role() string { return os.Getenv(envRole) }

// helperFail ends a helper that cannot go on; the test sees its stderr.
func helperFail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(3)
}

// alive reports whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(syscall.Kill(pid, 0), syscall.EPERM)
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}
