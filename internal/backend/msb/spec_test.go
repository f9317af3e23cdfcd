package msb

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/backend"
)

func TestPlanRun(t *testing.T) {
	for _, tc := range []struct {
		spec   backend.Spec
		want   string // the argv, space-joined, host ports as HOST
		reason string
	}{
		{backend.Spec{Image: "redis:7-alpine"}, "run --name N redis:7-alpine",
			"nil Cmd keeps the image's command: no `--` at all"},
		{backend.Spec{Image: "redis:7-alpine", Cmd: []string{}}, "run --name N redis:7-alpine",
			"an empty Cmd is no command either: `--` with nothing after it would be one"},
		{backend.Spec{Image: "redis", Cmd: []string{"redis-server", "--port", "6379"}}, "run --name N redis -- redis-server --port 6379",
			"a command follows `--`, so its own flags are never msb's"},
		{backend.Spec{Image: "x", MemoryLimitMB: 512}, "run --name N -m 512M x",
			"memory is msb's SIZE, in MiB, right after the name as the family passes it"},
		{backend.Spec{Image: "x", Ports: []string{"8080/tcp", "8080", "53/udp"}}, "run --name N -p HOST:8080 -p HOST:53/udp x",
			"8080 and 8080/tcp are one port; udp keeps its suffix"},
		{backend.Spec{Image: "x", Env: map[string]string{"Z": "", "A": "a=b c"}}, "run --name N -e A=a=b c -e Z= x",
			"env is sorted, one -e KEY=VALUE per variable, values verbatim"},
	} {
		plan, err := planRun("N", tc.spec)
		if err != nil {
			t.Errorf("%s: %v", tc.reason, err)
			continue
		}
		args := slices.Clone(plan.args)
		for i := range args {
			if i > 0 && args[i-1] == "-p" {
				host, rest, _ := strings.Cut(args[i], ":")
				if host == "" || host == "0" {
					t.Errorf("%s: no host port in %q", tc.reason, args[i])
				}
				args[i] = "HOST:" + rest
			}
		}
		if got := strings.Join(args, " "); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.reason, got, tc.want)
		}
	}
}

func TestPlanRunRefuses(t *testing.T) {
	for _, tc := range []struct {
		spec        backend.Spec
		unsupported bool
		reason      string
	}{
		{backend.Spec{}, false, "no image"},
		{backend.Spec{Image: "--rm"}, false, "an image msb would read as a flag"},
		{backend.Spec{Image: "x", Networks: map[string][]string{"n": nil}}, true, "msb has no networks"},
		{backend.Spec{Image: "x", Ports: []string{"http"}}, false, "not a port number"},
		{backend.Spec{Image: "x", Ports: []string{"0"}}, false, "port 0"},
		{backend.Spec{Image: "x", Ports: []string{"80/sctp"}}, false, "neither tcp nor udp"},
		{backend.Spec{Image: "x", Ports: []string{"080"}}, false, "not the canonical spelling of a number"},
		{backend.Spec{Image: "x", Env: map[string]string{"A=B": "c"}}, false, "a variable name holding '='"},
		{backend.Spec{Image: "x", Env: map[string]string{"": "c"}}, false, "an empty variable name"},
		{backend.Spec{Image: "x", MemoryLimitMB: -1}, false, "a negative memory limit"},
		{backend.Spec{Image: "x", Files: []backend.File{{GuestPath: "etc/x"}}}, false, "a relative guest path"},
		{backend.Spec{Image: "x", Files: []backend.File{{GuestPath: "/etc/a:b"}}}, false, "a guest path msb would split"},
		{backend.Spec{Image: "x", Files: []backend.File{{GuestPath: "/etc/../x"}}}, false, "an unclean guest path"},
	} {
		_, err := planRun("N", tc.spec)
		if err == nil {
			t.Errorf("%s: accepted", tc.reason)
			continue
		}
		if errors.Is(err, errors.ErrUnsupported) != tc.unsupported {
			t.Errorf("%s: %v, want ErrUnsupported: %v", tc.reason, err, tc.unsupported)
		}
	}
}

func TestParseLs(t *testing.T) {
	// The shape of msb's crates/cli/lib/commands/list.rs: serde_json's
	// pretty printer, keys in BTreeMap order, created_at possibly null.
	const real = `[
  {
    "created_at": "2026-11-29T20:30:38Z",
    "image": "redis:7-alpine",
    "name": "rz-0a1b2c3d-1",
    "status": "Running"
  },
  {
    "created_at": null,
    "image": "-",
    "name": "rz-0a1b2c3d-2",
    "status": "Stopped"
  },
  {"name": "no-status"},
  {"status": "Running"},
  {"name": "extra", "status": "Crashed", "labels": {"a": "b"}, "cpu_percent": 1.5}
]`
	got, err := parseLs(real)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"rz-0a1b2c3d-1": "Running", "rz-0a1b2c3d-2": "Stopped", "extra": "Crashed"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	for _, empty := range []string{"[]", "[]\n", "", "  \n"} {
		if got, err := parseLs(empty); err != nil || len(got) != 0 {
			t.Errorf("parseLs(%q) = %v, %v", empty, got, err)
		}
	}
	for _, bad := range []string{"No sandboxes found.", `{"name":"x"}`, "[{"} {
		if _, err := parseLs(bad); err == nil {
			t.Errorf("parseLs(%q) accepted", bad)
		}
	}
}

func TestShownBoundsOutput(t *testing.T) {
	long := strings.Repeat("x", 10*maxShown) + "error: the end"
	s := shown("\n  " + long + "\n")
	if len(s) > maxShown+64 || !strings.HasSuffix(s, "error: the end") || !strings.HasPrefix(s, "xxx") {
		t.Errorf("shown kept %d bytes: %.80q…", len(s), s)
	}
	if shown("  short\n") != "short" {
		t.Error("short output is not just trimmed")
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{limit: 4}
	tb.Write([]byte("abcdef"))
	tb.Write([]byte("gh"))
	if got := tb.String(); got != "efgh" {
		t.Errorf("tail = %q, want efgh", got)
	}
}
