//go:build linux

package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// snapshot reads the run's files (name → content) as they are.
func snapshot(t testing.TB, cache, id string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range harness.RunFiles(cache, id) {
		b, err := os.ReadFile(filepath.Join(harness.RunsDir(cache), f))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = b
	}
	return out
}

func sameFiles(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}

// shortDir is a temp dir with a short path, for unix sockets (108 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "rz-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Row 7: the engine unreachable while sweeping. A dead run (owner and
// watchdog SIGKILLed) made through a socket proxy to the engine; then
//
//	(a) a sweeper with DOCKER_HOST at a socket nobody listens on: it cannot
//	    open the engine, sweeps nothing, and the run's files are untouched;
//	(b) a sweeper that opened the engine through the proxy, which then
//	    vanishes before it sweeps: every removal fails, the run is kept,
//	    every name stays listed;
//	(c) the proxy back on the same path, a later sweep removes everything.
func TestRow07EngineUnreachable(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	target, ok := strings.CutPrefix(r.eng.Host, "unix://")
	if !ok {
		t.Skipf("the engine is at %s, not a unix socket this row can put a proxy before", r.eng.Host)
	}
	sock := filepath.Join(shortDir(t), "engine.sock")
	px, err := harness.StartProxy("unix", sock, target)
	if err != nil {
		t.Fatal(err)
	}
	viaProxy := "DOCKER_HOST=unix://" + sock
	o := r.start("owner through the proxy", harness.Plan{Containers: 2, Networks: 1}, viaProxy).ready()
	if ep := o.get("endpoint"); ep != "unix://"+sock {
		t.Fatalf("the owner's endpoint is %q, want unix://%s", ep, sock)
	}
	o.killSession()
	before := snapshot(t, r.cache, o.run)
	if len(before) != 3 {
		t.Fatalf("the dead run has files %q, want its record and two line files", slices.Collect(maps.Keys(before)))
	}

	// (a) A dead socket.
	s1 := r.start("sweeper at a dead socket", harness.Plan{Then: harness.Sweep}, "DOCKER_HOST=unix:///nonexistent.sock")
	msg, err := s1.Get("open.err", readyWithin)
	if err != nil {
		t.Fatalf("the sweeper at a dead socket opened an engine: %v", err)
	}
	if !strings.Contains(msg, "nonexistent.sock") {
		t.Errorf("the sweeper's error does not name the socket it was given: %s", msg)
	}
	s1.finish()
	if after := snapshot(t, r.cache, o.run); !sameFiles(before, after) {
		t.Errorf("a sweeper that could not reach its engine changed the ledger: before %q, after %q", before, after)
	}
	o.checkAlive("(a) after the sweeper at a dead socket")
	t.Logf("(a) DOCKER_HOST=unix:///nonexistent.sock: %s; the ledger is byte-identical", msg)

	// (b) The engine vanishes between the sweeper's start and its sweep.
	s2 := r.start("sweeper whose engine vanishes", harness.Plan{Then: harness.Sweep, WaitGo: true}, viaProxy)
	if _, err := s2.Get("waiting", readyWithin); err != nil {
		t.Fatal(err)
	}
	px.Stop()
	if err := s2.Send("go"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Get("done", readyWithin); err != nil {
		t.Fatal(err)
	}
	d, why := decision2(s2.get(harness.ReportKey("round0", o.run)))
	if d != "kept" {
		t.Errorf("(b) the sweep decided %q (%s) with its engine gone, want kept", d, why)
	}
	kept := s2.get(harness.ReportKey("round0.kept", o.run))
	o.checkListed("(b) after a sweep with the engine gone", false)
	o.checkAlive("(b) after a sweep with the engine gone")
	identical := sameFiles(before, snapshot(t, r.cache, o.run))
	s2.finish()
	t.Logf("(b) engine gone mid-sweep: %s (%s); kept: %s; files byte-identical: %v", d, why, kept, identical)

	// (c) The engine is back at the same address.
	px2, err := harness.StartProxy("unix", sock, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px2.Stop)
	s3 := r.start("sweeper with the engine back", harness.Plan{Then: harness.Sweep}, viaProxy)
	if _, err := s3.Get("done", readyWithin); err != nil {
		t.Fatal(err)
	}
	if d, why := decision2(s3.get(harness.ReportKey("round0", o.run))); d != "reaped" {
		t.Errorf("(c) the sweep with the engine back decided %q (%s), want reaped", d, why)
	}
	if left := o.leftovers(); left != "" {
		t.Errorf("(c) after the sweep with the engine back, the run still has %s", left)
	}
	s3.finish()
}

// Row 8: two live owners (A with three sandboxes and a network, B starting
// and stopping sandboxes all the time) and a third process sweeping the
// same cache dir, round after round, with a fresh dead run to reap in each
// round: nothing of A, B or the bystander is ever removed.
func TestRow08LiveOwnersUntouched(t *testing.T) {
	t.Parallel()
	rounds := count(10, 100)
	r := newRig(t)
	a := r.start("live owner A", harness.Plan{Containers: 3, Networks: 1}).ready()
	b := r.start("live owner B (churning)", harness.Plan{Then: harness.Churn, Seed: time.Now().UnixNano()}).ready()
	s := r.start("sweeper", harness.Plan{Then: harness.Sweep, Rounds: rounds, DeadRunPerRound: true, PauseMS: 1000, Seed: time.Now().UnixNano()})
	if _, err := s.Get("done", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	live := map[string]string{a.run: "A", b.run: "B", r.by.run: "the bystander"}
	seen := map[string]int{}
	reasons := map[string]int{}
	for i := range rounds {
		p := "round" + strconv.Itoa(i)
		for id, who := range live {
			v, ok := s.Value(harness.ReportKey(p, id))
			if !ok {
				continue // B between a prune and its next record
			}
			seen[who]++
			d, why := decision2(v)
			if d != "left alone" {
				t.Errorf("%s: the sweep decided %q about live owner %s (%s)", p, d, who, why)
			}
			reasons[who+": "+strings.SplitN(why, " ", 2)[0]]++
		}
		dead := s.get(p + ".dead")
		if d, why := decision2(s.get(harness.ReportKey(p, dead))); d != "reaped" {
			t.Errorf("%s: the round's dead run %s: %q (%s), want reaped", p, dead, d, why)
		}
	}
	a.checkAlive("live owner A, after the sweeps")
	s.finish()
	b.finish()
	churned := b.get("churned")
	r.waitGone(b, "B's own cleanup")
	a.finish()
	r.waitGone(a, "A's own cleanup")
	t.Logf("%d rounds: A seen %d times, B %d, the bystander %d, every time left alone (%v); B churned %s times while they ran",
		rounds, seen["A"], seen["B"], seen["the bystander"], reasons, churned)
	if seen["A"] != rounds {
		t.Errorf("A was seen in %d of %d rounds", seen["A"], rounds)
	}
}

// newRunID is a fresh 8-hex run id.
func newRunID(t testing.TB) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// sleeper starts a container of the test image named name, with labels,
// on no network, and removes it when the test ends.
func (r *rig) sleeper(name string, labels map[string]string) {
	r.t.Helper()
	if _, err := r.eng.RunContainer(r.t.Context(), r.img, name, []string{"sleep", "3600"}, labels, true); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		// Not t.Context(): it is cancelled before cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.eng.Remove(ctx, name); err != nil {
			r.t.Errorf("cleanup: %v", err)
		}
	})
}

// fakeRun writes a run with record rec listing one real, running
// container (labelled with the run, on no network), and returns the run id
// and the container's name. The container is removed when the test ends.
func (r *rig) fakeRun(rec []byte) (id, name string) {
	r.t.Helper()
	id = newRunID(r.t)
	name = "rz-" + id + "-1"
	r.sleeper(name, map[string]string{harness.LabelRunID: id, harness.LabelRunIDAlt: id})
	if err := harness.WriteRun(r.cache, id, rec, []string{name}, nil); err != nil {
		r.t.Fatal(err)
	}
	return id, name
}

// Row 9: pid reuse. Records naming a live child process: with another
// start time they are dead (the pid was reused) and reaped; with its start
// time they are alive and kept. Both the Go record (exact start ticks) and
// the family's (startedIso, 2 s window) are checked. Once the child dies,
// the kept ones are reaped too.
func TestRow09PIDReuse(t *testing.T) {
	proctest.NeedHostPidNamespace(t) // half its records are written as the family writes them
	t.Parallel()
	r := newRig(t)
	child := exec.Command("sleep", "3600")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	id, ok, err := ledger.Lookup(child.Process.Pid)
	if err != nil || !ok || id.StartTicks == 0 || id.Start.IsZero() {
		t.Fatalf("identity of the child %d: %+v %v %v", child.Process.Pid, id, ok, err)
	}
	endpoint := r.by.get("endpoint")
	goRec := func(ticks uint64) []byte {
		return ledger.Record{PID: id.PID, StartedISO: ledger.FormatISO(id.Start), Backend: "docker", StartTicks: ticks,
			BootID: id.BootID, PidNamespace: id.PidNamespace, Endpoint: endpoint, Writer: "go"}.Marshal()
	}
	// The family's records: Node's compact form, milliseconds.
	familyRec := func(off time.Duration) []byte {
		return fmt.Appendf(nil, `{"pid":%d,"startedIso":%q,"backend":"docker"}`, id.PID, id.Start.Add(off).UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	type rec struct {
		name  string
		data  []byte
		alive bool
		id    string
		ctr   string
	}
	recs := []*rec{
		{name: "go record, start ticks + 1", data: goRec(id.StartTicks + 1)},
		{name: "go record, the child's start ticks", data: goRec(id.StartTicks), alive: true},
		{name: "family record, startedIso + 5 s", data: familyRec(5 * time.Second)},
		{name: "family record, startedIso - 2.5 s", data: familyRec(-2500 * time.Millisecond)},
		{name: "family record, startedIso + 1.5 s (within the 2 s window)", data: familyRec(1500 * time.Millisecond), alive: true},
		{name: "family record, the child's startedIso", data: familyRec(0), alive: true},
	}
	for _, c := range recs {
		c.id, c.ctr = r.fakeRun(c.data)
	}
	check := func(s *owner, when string, which func(*rec) bool, alive bool) {
		t.Helper()
		for _, c := range recs {
			if !which(c) {
				continue
			}
			d, why := s.sweepOf(c.id)
			exists, running, err := r.eng.ContainerState(t.Context(), c.ctr)
			if err != nil {
				t.Fatal(err)
			}
			files := harness.RunFiles(r.cache, c.id)
			if alive {
				// The writer's two files stay; a sweep that judged a family
				// record keeps a copy of it as Go's own (ledger.Remember),
				// so a family run may show a third.
				want := []string{c.id + ledger.RecordExt, c.id + ledger.SandboxesExt}
				if slices.Contains(files, c.id+ledger.OwnRecordExt) {
					want = []string{c.id + ledger.RecordExt, c.id + ledger.OwnRecordExt, c.id + ledger.SandboxesExt}
				}
				kept := slices.Equal(files, want)
				if d != "left alone" || !strings.HasPrefix(why, "alive") || !running || !kept {
					t.Errorf("%s, %s: %s (%s); container running=%v; files %q; want left alone, alive, running, the record and its sandboxes", when, c.name, d, why, running, files)
				}
			} else if d != "reaped" || exists || len(files) != 0 {
				t.Errorf("%s, %s: %s (%s); container exists=%v; files %q; want reaped and gone", when, c.name, d, why, exists, files)
			}
			t.Logf("%s, %s: %s: %s", when, c.name, d, why)
		}
	}
	s := r.start("next process (child alive)", harness.Plan{Containers: 1}).ready()
	check(s, "child alive", func(c *rec) bool { return c.alive }, true)
	check(s, "child alive", func(c *rec) bool { return !c.alive }, false)
	s.finish()

	_ = child.Process.Kill()
	_ = child.Wait()
	s2 := r.start("next process (child dead)", harness.Plan{Containers: 1}).ready()
	check(s2, "child dead", func(c *rec) bool { return c.alive }, false)
	s2.finish()
}
