package userkit

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/sandboxtest"
)

// The environment KeepAlive is steered with (with EnvImage, EnvCmd,
// EnvInfo and EnvPass; RIGHTSIZE_REUSE=true is the harness's to set).
const (
	EnvKeepAlives = "USER_KEEPALIVES" // one keep-alive per word: the word is in its environment, so its identity
	EnvReuseTTL   = "USER_REUSE_TTL"  // their Spec.ReuseTTL (a Go duration; none when unset)
	EnvGo         = "USER_GO"         // "1": wait for a line on stdin before starting them
)

// KeepAlive starts keep-alive sandboxes as the README says (Spec.Reuse),
// one per word of USER_KEEPALIVES, says each (keepalive=<name> <container
// id> lines in the info file), then blocked=1, and blocks as Hold does:
// until killed, or, with USER_PASS=1, until its stdin closes, and then it
// passes, letting them go.
func KeepAlive(t *testing.T) {
	img := os.Getenv(EnvImage)
	if img == "" {
		t.Skip(EnvImage + " is not set: this test is run by the repository's harness")
	}
	say := Info(t)
	in := bufio.NewReader(os.Stdin)
	if os.Getenv(EnvGo) == "1" {
		if _, err := in.ReadString('\n'); err != nil {
			t.Fatalf("waiting for go: %v", err)
		}
	}
	cmd := []string{"/server"}
	if v := os.Getenv(EnvCmd); v != "" {
		cmd = strings.Fields(v)
	}
	var ttl time.Duration
	if v := os.Getenv(EnvReuseTTL); v != "" {
		var err error
		if ttl, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, word := range strings.Fields(os.Getenv(EnvKeepAlives)) {
		g := sandboxtest.Start(t, sandboxtest.Spec{
			Image: img, Cmd: cmd, Env: map[string]string{"USER_KEEPALIVE": word},
			Reuse: true, ReuseTTL: ttl,
		})
		say("keepalive", g.Name()+" "+g.Container().GetContainerID())
	}
	say("blocked", "1")
	if os.Getenv(EnvPass) == "1" {
		_, _ = io.Copy(io.Discard, in)
		return
	}
	for {
		time.Sleep(time.Minute) // until SIGKILL, a signal or the -timeout alarm
	}
}
