package proctest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/rightsize/rightsize-go/internal/envlist"
)

// TestArgv is the command line that re-executes this test binary into the
// test named test alone (a TestXHelper that skips unless its environment
// says it is the helper), once, with args added (a -test.timeout).
func TestArgv(test string, args ...string) []string {
	return append([]string{os.Args[0], "-test.run=^" + test + "$", "-test.count=1"}, args...)
}

// Environ is this process's environment without the variables drop says
// to leave out (by key; nil leaves out none), then set ("KEY=value"), each
// replacing any earlier value of its key.
func Environ(drop func(key string) bool, set ...string) []string {
	env := os.Environ()
	if drop != nil {
		env = envlist.Without(env, drop)
	}
	return envlist.Merge(env, set...)
}

// Say reports key=value to the test, one line on stdout ("rz:key=value",
// written at once). Newlines and carriage returns in value are escaped, so
// that it stays one line.
func Say(key, value string) {
	value = strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(value)
	fmt.Fprintf(os.Stdout, "%s%s=%s\n", prefix, key, value)
}

var stdin = sync.OnceValue(func() *bufio.Reader { return bufio.NewReader(os.Stdin) })

// WaitGo says "waiting=go", then waits for the test's "go" line on stdin.
func WaitGo() error {
	Say("waiting", "go")
	if l, err := stdin().ReadString('\n'); err != nil || strings.TrimSpace(l) != "go" {
		return fmt.Errorf("want go on stdin, got %q (%v)", l, err)
	}
	return nil
}

// Block waits until the test closes stdin, or dies.
func Block() { _, _ = io.Copy(io.Discard, stdin()) }
