package sandboxtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// GuardAll refuses, with one line and exit 1, where it cannot guard: the
// tests never run, nothing waits.
func TestGuardAllRefuses(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct {
		name string
		env  map[string]string
		// props is ~/.testcontainers.properties.
		props string
		want  string
	}{
		{"no engine", map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(home, "none.sock")}, "", "none.sock"},
		{"tc.host", map[string]string{"DOCKER_HOST": ""}, "tc.host=tcp://127.0.0.1:1\n", "tc.host=tcp://127.0.0.1:1"},
		{"tls", map[string]string{"DOCKER_HOST": "tcp://127.0.0.1:1", "DOCKER_TLS_VERIFY": "1"}, "", "TLS"},
		{"ssh", map[string]string{"DOCKER_HOST": "ssh://me@host"}, "", "unix:// or tcp://"},
		{"context", map[string]string{"DOCKER_HOST": "", "DOCKER_CONTEXT": "remote"}, "", `context "remote"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HOME", home)
			os.Remove(filepath.Join(home, ".testcontainers.properties"))
			if tc.props != "" {
				if err := os.WriteFile(filepath.Join(home, ".testcontainers.properties"), []byte(tc.props), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range []string{"DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT", "RIGHTSIZE_BACKEND"} {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
				if v == "" {
					os.Unsetenv(k)
				}
			}
			want := tc.want
			if runtime.GOOS == "windows" {
				want = "not on Windows" // whatever the engine: the proxy needs a unix socket
			}
			before := os.Getenv("DOCKER_HOST")
			errBuf := captureStderr(t)
			ran := false
			code := runMainWith(runFunc(func() int { ran = true; return 0 }), mainConfig{guardAll: true})
			out := errBuf.String()
			if code != 1 || ran {
				t.Errorf("code %d, tests ran %v; want 1 and no test run", code, ran)
			}
			if l := lines(out); len(l) != 1 || !strings.Contains(l[0], "GuardAll") || !strings.Contains(l[0], want) {
				t.Errorf("stderr %q: want one line naming GuardAll and %q", out, want)
			}
			if got := os.Getenv("DOCKER_HOST"); got != before {
				t.Errorf("DOCKER_HOST is %q after the refusal, want it as it was (%q)", got, before)
			}
		})
	}
}

// A create's run label passes it unguarded only when it names this
// process's run, or a run of this ledger whose owner lives: the judgement
// of the ledger's real records, against real processes.
func TestLiveRun(t *testing.T) {
	cache := t.TempDir()
	live, err := ledger.NewRun(cache, ledger.Owner{Backend: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Add(sandboxKind, "rz-"+live.ID()+"-1"); err != nil { // writes its record
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Remove(sandboxKind, "rz-"+live.ID()+"-1") })
	ended := exec.Command(os.Args[0], "-test.run=^$") // `true` is no program of Windows
	ended.Env = append(os.Environ(), "RIGHTSIZE_TEST_KEEP_ENV=1")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	dead := ledger.Record{PID: ended.Process.Pid, StartedISO: ledger.FormatISO(time.Now()), Backend: "docker"}
	if err := os.WriteFile(ledger.RecordPath(live.RunsDir(), "deadbeef"), dead.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ledger.RecordPath(live.RunsDir(), "0badf00d"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	const own = "0123abcd"
	for _, tc := range []struct {
		id     string
		want   bool
		reason string
	}{
		{own, true, "this process's own run"},
		{live.ID(), true, "a record of this ledger whose owner (this process) lives"},
		{"deadbeef", false, "a record whose owner has exited"},
		{"0badf00d", false, "a record that cannot be read names no owner"},
		{"feedf00d", false, "no record of that run in this ledger"},
		{"", false, "an empty run id"},
		{"../" + live.ID(), false, "not a run id: a path"},
	} {
		if got := liveRun(cache, own, tc.id); got != tc.want {
			t.Errorf("liveRun(%q) = %v, want %v: %s", tc.id, got, tc.want, tc.reason)
		}
	}
}
