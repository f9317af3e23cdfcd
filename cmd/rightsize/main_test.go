package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/pidns"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// Backends the scripts choose with RIGHTSIZE_BACKEND (this test binary is
// the rightsize they run):
//
//	clitest-hang    never answers: opening it waits for its context to end
//	clitest-stall   answers, and never finishes a removal
//	clitest-docker  the docker backend, seeing only the keep-alive
//	                sandboxes of the script (named rz-reuse-$RZ…): the
//	                engine is shared, and reuse rm --all and prune act on
//	                every keep-alive sandbox they see
func init() {
	backend.Register("clitest-hang", func(ctx context.Context) (backend.Driver, error) {
		<-ctx.Done()
		return nil, fmt.Errorf("%w: %v", backend.ErrUnreachable, ctx.Err())
	})
	backend.Register("clitest-stall", func(context.Context) (backend.Driver, error) {
		return stallDriver{}, nil
	})
	backend.Register("clitest-docker", func(ctx context.Context) (backend.Driver, error) {
		rz := os.Getenv("RZ")
		if rz == "" {
			return nil, errors.New("clitest-docker: $RZ is not set")
		}
		d, err := docker.Open(ctx)
		if err != nil {
			return nil, err
		}
		return scopedDocker{d, backend.KeepAlivePrefix + rz}, nil
	})
}

// stallDriver is a docker-like backend on the default engine whose every
// removal waits for its context to end, and fails. Only what a sweep calls
// is implemented.
type stallDriver struct{ backend.Driver }

func (stallDriver) Name() string          { return backend.Docker }
func (stallDriver) Endpoint() string      { return "" }
func (stallDriver) DefaultEndpoint() bool { return true }
func (stallDriver) Close() error          { return nil }

func (stallDriver) Remove(ctx context.Context, k backend.Kind, runID string, names []string) []error {
	<-ctx.Done()
	errs := make([]error, len(names))
	for i, n := range names {
		errs[i] = fmt.Errorf("remove %s %s: %w: %v", k, n, backend.ErrUnreachable, ctx.Err())
	}
	return errs
}

type scopedDocker struct {
	*docker.Driver
	prefix string
}

func (d scopedDocker) KeepAlives(ctx context.Context) ([]backend.Description, error) {
	all, err := d.Driver.KeepAlives(ctx)
	var mine []backend.Description
	for _, k := range all {
		if strings.HasPrefix(k.Name, d.prefix) {
			mine = append(mine, k)
		}
	}
	return mine, err
}

func TestMain(m *testing.M) {
	// The test binary is also `rightsize`, for the scripts: testscript
	// runs main when it is executed under that name.
	tclog.SetDefault(tclog.NewNoopLogger())
	testscript.Main(removeBuilt{m}, map[string]func(){"rightsize": main})
}

// removeBuilt runs the tests, then removes the program the demo tests
// built, if they did.
type removeBuilt struct{ m *testing.M }

func (r removeBuilt) Run() int {
	code := r.m.Run()
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
	return code
}

// testLabel marks what a script creates on the engine with the script's
// id ($RZ), so that it is removed whatever the script did.
const testLabel = "rightsize-cli-test"

// TestScripts runs testdata/script/*.txtar. Scripts that need the engine
// start with `[!engine] skip`; each gets its own cache dir
// ($RIGHTSIZE_CACHE_DIR = $WORK/cache), $RZ (8 hex digits for names and
// the rightsize-cli-test label), and $IMAGE (the busybox test image).
func TestScripts(t *testing.T) {
	var img string
	var api *client.Client
	if skip, _ := strconv.ParseBool(os.Getenv(testimage.EnvSkip)); !skip && !testing.Short() {
		img = testimage.Busybox(t)
		api = dockerAPI(t)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			id := randomHex()
			env.Setenv("RZ", id)
			env.Setenv("IMAGE", img)
			env.Setenv("ESC", "\x1b[2J") // a terminal escape, which a script cannot hold raw
			env.Setenv(ledger.EnvCacheDir, filepath.Join(env.WorkDir, "cache"))
			env.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			for _, k := range []string{"DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "TESTCONTAINERS_HOST_OVERRIDE"} {
				if v, ok := os.LookupEnv(k); ok {
					env.Setenv(k, v)
				}
			}
			if img == "" {
				// No engine for the scripts (-short, or the engine tests
				// skipped): the commands use the memory backend, and a
				// script that asks for another names it.
				env.Setenv("RIGHTSIZE_BACKEND", "memory")
				env.Setenv("DOCKER_HOST", "unix://"+filepath.Join(env.WorkDir, "no-engine.sock"))
			}
			if _, ok := os.LookupEnv("DOCKER_CONFIG"); !ok {
				if home, err := os.UserHomeDir(); err == nil {
					env.Setenv("DOCKER_CONFIG", filepath.Join(home, ".docker"))
				}
			}
			if api != nil {
				env.Defer(func() { removeLabelled(env.T(), api, testLabel+"="+id) })
			}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "engine":
				return img != "", nil
			case "hostpidns":
				// The family's records name no pid namespace: only
				// from the host's can they be judged.
				return pidns.InInitial(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"writeq":     cmdWriteq,
			"liverecord": cmdLiverecord,
			"exits":      cmdExits,
			"lsjson":     cmdLsjson,
			"kajson":     cmdKajson,
			"uselock":    cmdUselock,
			"nextsecond": cmdNextsecond,
		},
	})
}

// cmdWriteq writes a file whose name and content are given with Go
// escapes (\n, \x1b, \u202e…), which a txtar file cannot hold raw.
//
//	writeq NAME CONTENT
func cmdWriteq(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: writeq NAME CONTENT")
	}
	name, err := unescape(args[0])
	ts.Check(err)
	content, err := unescape(args[1])
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(name), []byte(content), 0o600))
}

func unescape(s string) (string, error) {
	var b strings.Builder
	for s != "" {
		r, multibyte, tail, err := strconv.UnquoteChar(s, 0)
		if err != nil {
			return "", fmt.Errorf("unescape %q: %w", s, err)
		}
		if r < 0x100 && !multibyte {
			b.WriteByte(byte(r))
		} else {
			b.WriteRune(r)
		}
		s = tail
	}
	return b.String(), nil
}

// cmdLiverecord writes the record rightsize-go would write for the process
// running the scripts, which lives as long as they run.
//
//	liverecord FILE
func cmdLiverecord(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: liverecord FILE")
	}
	me, err := ledger.Self()
	ts.Check(err)
	rec := ledger.Record{PID: me.PID, Backend: "docker", StartTicks: me.StartTicks, BootID: me.BootID, PidNamespace: me.PidNamespace, Writer: "go"}
	if !me.Start.IsZero() {
		rec.StartedISO = ledger.FormatISO(me.Start)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), rec.Marshal(), 0o600))
	ts.Setenv("LIVEPID", strconv.Itoa(me.PID))
}

// cmdExits runs a command and checks its exit code; stdout and stderr are
// then those of the command, as after exec.
//
//	exits CODE COMMAND [ARG...]
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE COMMAND [ARG...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

// lsKeys are the fields of `rightsize ls --json`, all always present.
var lsKeys = []string{"ageSeconds", "backend", "endpoint", "error", "id", "modified", "msbPath", "networks", "pid", "problems", "reason", "rejected", "sandboxes", "startedIso", "status", "tests", "writer"}

// cmdLsjson checks the output of the last `rightsize ls --json`: every
// object has exactly the documented fields, and run ID's FIELD, as JSON,
// is VALUE.
//
//	lsjson                     only the shape
//	lsjson count N             N runs
//	lsjson ID FIELD VALUE      one field
func cmdLsjson(ts *testscript.TestScript, neg bool, args []string) {
	var runs []map[string]json.RawMessage
	ts.Check(json.Unmarshal([]byte(ts.ReadFile("stdout")), &runs))
	if runs == nil {
		ts.Fatalf("ls --json printed null, want an array")
	}
	for _, r := range runs {
		var keys []string
		for k := range r {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, lsKeys) {
			ts.Fatalf("run %s has fields %q, want %q", r["id"], keys, lsKeys)
		}
	}
	switch {
	case len(args) == 0:
		return
	case len(args) == 2 && args[0] == "count":
		if strconv.Itoa(len(runs)) != args[1] {
			ts.Fatalf("ls --json lists %d runs, want %s", len(runs), args[1])
		}
		return
	case len(args) != 3:
		ts.Fatalf("usage: lsjson [count N | ID FIELD VALUE]")
	}
	for _, r := range runs {
		var id string
		_ = json.Unmarshal(r["id"], &id)
		if id != args[0] {
			continue
		}
		var buf bytes.Buffer
		ts.Check(json.Compact(&buf, r[args[1]]))
		got := buf.String()
		if (got == args[2]) == neg {
			ts.Fatalf("run %s: %s is %s, want %s%s", id, args[1], got, map[bool]string{true: "not ", false: ""}[neg], args[2])
		}
		return
	}
	ts.Fatalf("ls --json lists no run %s", args[0])
}

func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func dockerAPI(t *testing.T) *client.Client {
	t.Helper()
	c, err := testcontainers.NewDockerClientWithOpts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Client
}

// removeLabelled removes every container, then every network, carrying
// label (KEY=VALUE).
func removeLabelled(t interface{ Log(...any) }, api *client.Client, label string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := client.Filters{}.Add("label", label)
	if cl, err := api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cl.Items {
			if _, err := api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
				t.Log("cleanup:", err)
			}
		}
	} else {
		t.Log("cleanup:", err)
	}
	if nl, err := api.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range nl.Items {
			if _, err := api.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
				t.Log("cleanup:", err)
			}
		}
	} else {
		t.Log("cleanup:", err)
	}
}

// kaKeys are the fields of each keep-alive sandbox of
// `rightsize ls --keep-alive --json`, kaTopKeys those of the object.
var (
	kaKeys = []string{"ageSeconds", "backend", "createdIso", "engine", "entry", "error", "expiresIso", "hash", "image", "inUse",
		"lastUsedBy", "lastUsedIso", "name", "note", "ports", "supersededBy", "ttlFrom", "ttlSeconds", "udpPorts", "unseen"}
	kaTopKeys = []string{"backend", "cacheDir", "endpoint", "engineError", "keepAlive", "registryError", "ttlError"}
)

// cmdKajson checks the output of the last `rightsize ls --keep-alive
// --json`: the object and every sandbox have exactly the documented
// fields, and NAME's FIELD (or the object's, for "."), as JSON, is VALUE.
//
//	kajson                     only the shape
//	kajson count N             N keep-alive sandboxes
//	kajson NAME FIELD VALUE    one field
//	kajson . FIELD VALUE       one field of the object
func cmdKajson(ts *testscript.TestScript, neg bool, args []string) {
	var top map[string]json.RawMessage
	ts.Check(json.Unmarshal([]byte(ts.ReadFile("stdout")), &top))
	if keys := sortedKeys(top); !slices.Equal(keys, kaTopKeys) {
		ts.Fatalf("ls --keep-alive --json has fields %q, want %q", keys, kaTopKeys)
	}
	var rows []map[string]json.RawMessage
	ts.Check(json.Unmarshal(top["keepAlive"], &rows))
	if rows == nil {
		ts.Fatalf("keepAlive is %s, want an array", top["keepAlive"])
	}
	for _, r := range rows {
		if keys := sortedKeys(r); !slices.Equal(keys, kaKeys) {
			ts.Fatalf("keep-alive %s has fields %q, want %q", r["name"], keys, kaKeys)
		}
	}
	switch {
	case len(args) == 0:
		return
	case len(args) == 2 && args[0] == "count":
		if strconv.Itoa(len(rows)) != args[1] {
			ts.Fatalf("ls --keep-alive --json lists %d sandboxes, want %s", len(rows), args[1])
		}
		return
	case len(args) != 3:
		ts.Fatalf("usage: kajson [count N | NAME FIELD VALUE | . FIELD VALUE]")
	}
	check := func(what string, obj map[string]json.RawMessage) {
		var buf bytes.Buffer
		ts.Check(json.Compact(&buf, obj[args[1]]))
		if got := buf.String(); (got == args[2]) == neg {
			ts.Fatalf("%s: %s is %s, want %s%s", what, args[1], got, map[bool]string{true: "not ", false: ""}[neg], args[2])
		}
	}
	if args[0] == "." {
		check("ls --keep-alive --json", top)
		return
	}
	for _, r := range rows {
		var name string
		_ = json.Unmarshal(r["name"], &name)
		if name == args[0] {
			check("keep-alive "+name, r)
			return
		}
	}
	ts.Fatalf("ls --keep-alive --json lists no %s", args[0])
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// cmdUselock holds the use lock of keep-alive sandbox NAME on the engine
// (ledger.KeepAliveUseLock, in the script's TMPDIR), shared, until the
// script ends, as a rightsize-go test process holds it while it uses the
// sandbox.
//
//	uselock NAME
//
// cmdNextsecond waits until the second after the one the engine lists
// keep-alive NAME as created in: the engine tells creation times to the
// second, and a keep-alive made from then on is later than NAME.
//
//	nextsecond NAME
func cmdNextsecond(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: nextsecond NAME")
	}
	ctx, cancel := context.WithTimeout(context.Background(), backend.ResolveTimeout)
	defer cancel()
	d, err := docker.Open(ctx)
	ts.Check(err)
	defer d.Close()
	list, err := d.KeepAlives(ctx)
	ts.Check(err)
	i := slices.IndexFunc(list, func(k backend.Description) bool { return k.Name == args[0] })
	if i < 0 {
		ts.Fatalf("nextsecond: the engine lists no keep-alive %s", args[0])
	}
	after := list[i].Created.Truncate(time.Second).Add(time.Second)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(after); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			ts.Fatalf("nextsecond: the engine says %s was created at %s, more than 5s ahead of this clock", args[0], list[i].Created)
		}
	}
}

func cmdUselock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: uselock NAME")
	}
	ctx, cancel := context.WithTimeout(context.Background(), backend.ResolveTimeout)
	defer cancel()
	d, err := docker.Open(ctx)
	ts.Check(err)
	defer d.Close()
	dir, err := ledger.UseDir(ts.Getenv("TMPDIR"))
	ts.Check(err)
	l, err := ledger.KeepAliveUseLock(dir, d.Name(), d.Endpoint(), args[0])
	ts.Check(err)
	ok, err := l.TryRLockContext(ctx, 20*time.Millisecond) // as a test process takes it
	ts.Check(err)
	if !ok {
		ts.Fatalf("uselock %s: already locked", args[0])
	}
	ts.Defer(func() { l.Unlock() })
}
