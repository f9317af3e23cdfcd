package sandboxtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			for _, k := range []string{"DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT"} {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
				if v == "" {
					os.Unsetenv(k)
				}
			}
			before := os.Getenv("DOCKER_HOST")
			errBuf := captureStderr(t)
			ran := false
			code := runMainWith(runFunc(func() int { ran = true; return 0 }), mainConfig{guardAll: true})
			out := errBuf.String()
			if code != 1 || ran {
				t.Errorf("code %d, tests ran %v; want 1 and no test run", code, ran)
			}
			if l := lines(out); len(l) != 1 || !strings.Contains(l[0], "GuardAll") || !strings.Contains(l[0], tc.want) {
				t.Errorf("stderr %q: want one line naming GuardAll and %q", out, tc.want)
			}
			if got := os.Getenv("DOCKER_HOST"); got != before {
				t.Errorf("DOCKER_HOST is %q after the refusal, want it as it was (%q)", got, before)
			}
		})
	}
}
