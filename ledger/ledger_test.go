package ledger_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/ledger"
)

// The contract as a program outside the module reads it: a record in a
// sibling's bytes parses, and its owner is judged with a reason.
func TestContract(t *testing.T) {
	// rightsize-kotlin's Liveness.kt writes the epoch when the JVM cannot
	// read its own start: "unknown", not "before this boot".
	r, err := ledger.ParseRecord([]byte(`{"pid":` + strconv.Itoa(os.Getpid()) + `,"startedIso":"1970-01-01T00:00:00Z","backend":"docker"}`))
	if err != nil {
		t.Fatal(err)
	}
	if lv := ledger.Judge(r); lv.State != ledger.Alive {
		t.Errorf("this process, start unknown: %v, want alive", lv)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	r.PID = cmd.Process.Pid
	if lv := ledger.Judge(r); lv.State != ledger.Dead || lv.Reason == "" {
		t.Errorf("an exited child: %v, want dead with a reason", lv)
	}

	if _, err := ledger.ParseRecord([]byte(`{"pid":"x"`)); err == nil {
		t.Error("a corrupt record parsed")
	}
	for id, want := range map[string]bool{"799aad5a": true, "../x": false, "": false, "a/b": false} {
		if got := ledger.ValidRunID(id); got != want {
			t.Errorf("ValidRunID(%q) = %v, want %v", id, got, want)
		}
	}
	t.Setenv(ledger.EnvCacheDir, t.TempDir())
	if dir, err := ledger.Dir(); err != nil || !strings.HasPrefix(dir, os.Getenv(ledger.EnvCacheDir)) {
		t.Errorf("Dir() = %q, %v; want the folder %s names", dir, err, ledger.EnvCacheDir)
	}
}
