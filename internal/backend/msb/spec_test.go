package msb

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

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
		{backend.Spec{Image: "x", RunID: "0a1b2c3d", Labels: map[string]string{"-k": "-v", "a": "b=c d", "dev.rightsize.runId": "forged"}},
			"run --name N --label=-k=-v --label=a=b=c d --label=dev.rightsize.runId=0a1b2c3d --label=dev.rightsize.run_id=0a1b2c3d x",
			"the user's labels, then the run's under both spellings (a user's own run label is overwritten), sorted, each one word"},
		{backend.Spec{Image: "x", KeepAlive: "799aad5a3338", KeepAliveExtra: "e1", Labels: map[string]string{"dev.rightsize.run_id": "r"}},
			"run --name N --label=dev.rightsize.reuse=799aad5a3338 --label=dev.rightsize.reuse.go=e1 x",
			"a keep-alive sandbox carries its keep-alive marks instead of any run's"},
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
		{backend.Spec{Image: "x", Labels: map[string]string{"": "v"}}, false, "an empty label key, which msb refuses"},
		{backend.Spec{Image: "x", Labels: map[string]string{"a=b": "v"}}, false, "a label key msb would split"},
		{backend.Spec{Image: "x", Labels: map[string]string{"a": "v\x00"}}, false, "a NUL in a label value"},
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

func TestParseInspect(t *testing.T) {
	// Cut from what msb 0.6.18 prints (the real one is checked against the
	// real msb in TestRealRunArgv).
	const real = `{
  "active_config": null,
  "config": {
    "labels": {
      "dev.rightsize.runId": "0a1b2c3d",
      "k": "v w"
    },
    "name": "rz-0a1b2c3d-1"
  },
  "created_at": "2026-12-03T11:50:47.387091465+00:00",
  "name": "rz-0a1b2c3d-1",
  "status": "Stopped"
}`
	got, err := parseInspect("rz-0a1b2c3d-1", real)
	if err != nil || got.status != "Stopped" || got.labels["k"] != "v w" || got.labels[backend.LabelRunID] != "0a1b2c3d" {
		t.Errorf("parseInspect = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "[]", `{"name":"rz-0a1b2c3d-1","status":"Stopped"}`, strings.Replace(real, `"name": "rz-0a1b2c3d-1",
  "status"`, `"name": "other",
  "status"`, 1)} {
		if got, err := parseInspect("rz-0a1b2c3d-1", bad); err == nil {
			t.Errorf("parseInspect(%q) = %+v, want an error: nothing may be decided on it", bad, got)
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

func TestNetworks(t *testing.T) {
	d := &Driver{path: "/nonexistent/msb", live: map[string]*sandbox{}}
	ctx := t.Context()
	if _, err := d.CreateNetwork(ctx, "rz-net-0a1b2c3d", "r1"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("CreateNetwork: %v, want ErrUnsupported", err)
	}
	errs := d.Remove(ctx, backend.NetworkKind, "r1", []string{"rz-net-0a1b2c3d", "anything"})
	if len(errs) != 2 || errs[0] != nil || errs[1] != nil {
		t.Errorf("RemoveNetworks: %v, want nil for every name", errs)
	}
	if _, err := d.Create(ctx, "rz-netted-1", backend.Spec{Image: "busybox", Networks: map[string][]string{"rz-net-1": {"db"}}}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Create on a network: %v, want ErrUnsupported", err)
	}
}

func TestWatchdogPlan(t *testing.T) {
	for _, tc := range []struct {
		home string
		want []string
	}{
		{"", []string{"MSB_PATH=/opt/micro sandbox/msb", "RIGHTSIZE_BACKEND=msb"}},
		{"/h", []string{"MSB_PATH=/opt/micro sandbox/msb", "RIGHTSIZE_BACKEND=msb", "MSB_HOME=/h"}},
	} {
		d := &Driver{path: "/opt/micro sandbox/msb", home: tc.home}
		plan, err := d.Watchdog("r1")
		if err != nil || !slices.Equal(plan.Env, tc.want) || plan.Hold {
			t.Errorf("home %q: plan %+v, %v; want the watchdog on this msb and home, holding nothing", tc.home, plan, err)
		}
	}
	if _, ok := any(&Driver{}).(backend.RunLister); ok {
		t.Error("a RunLister would make the watchdog be told names only after the create: one its owner dies in the middle of would be found by label alone")
	}
	if _, err := (&Driver{path: "msb"}).Watchdog("r1"); err == nil {
		t.Error("a watchdog plan on a relative msb path")
	}
}

// The watchdog opens its backend by endpoint: msb must be openable so.
func TestOpenedByEndpoint(t *testing.T) {
	t.Setenv(EnvPath, "/bin/sh")
	t.Setenv(EnvHome, "rel/home")
	d, err := backend.OpenEndpoint(backend.Msb, "unix:///var/run/docker.sock")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name() != backend.Msb || !strings.HasPrefix(d.Endpoint(), EnvHome+"=/") || !strings.HasSuffix(d.Endpoint(), "/rel/home") {
		t.Errorf("opened %s on %q; want msb on the absolute MSB_HOME", d.Name(), d.Endpoint())
	}
}

func TestStopArgs(t *testing.T) {
	for grace, want := range map[time.Duration]string{
		0:                 "stop -f N",
		-time.Second:      "stop -f N",
		time.Millisecond:  "stop -t 1 N",
		2 * time.Second:   "stop -t 2 N",
		2*time.Second + 1: "stop -t 3 N",
	} {
		if got := strings.Join(stopArgs(grace, "N"), " "); got != want {
			t.Errorf("grace %v: %s, want %s", grace, got, want)
		}
	}
}
