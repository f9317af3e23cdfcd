package reaper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

// deadHost is an engine endpoint where nothing answers.
const deadHost = "unix:///nonexistent.sock"

// sweepCase is one run in a ledger of its own, and what one sweep must do
// with it. Names in removed, kept and files are templates: $0, $1, … are
// the names prepare returned; removed and kept hold prefixes of
// Item.String(), in order.
type sweepCase struct {
	name   string
	reason string
	// prepare writes run id into runs (creating containers as needed) and
	// returns the names the expectations refer to.
	prepare func(t *testing.T, f *fixture, runs, id string) []string
	// sweeper is the backend the sweep uses; nil: the real Docker backend.
	sweeper  func(t *testing.T, f *fixture) backend.Backend
	opts     func(id string) []reaper.Option
	decision reaper.Decision
	because  []string // key words of the reason, in any order
	removed  []string
	kept     []string
	rejected int
	// asked is what the backend must have been asked to remove: sandboxes,
	// then networks; nil: nothing.
	asked [][]string
	// files left in runs afterwards, by suffix of the run id; a left-alone
	// or dry-run case must leave them byte for byte as they were.
	files []string
	// check asserts the rest: containers there or gone, a second sweep.
	check func(t *testing.T, f *fixture, rep *reaper.Report, names []string)
}

type fixture struct {
	drv *docker.Driver
	me  ledger.Identity
	// dead is a process of this boot that no longer runs.
	dead ledger.Identity
}

func (f *fixture) deadRecord() []byte {
	return recordOf(f.dead, backend.Docker, f.drv.Endpoint()).Marshal()
}

// alive and gone assert a container's fate.
func (f *fixture) alive(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if !containerExists(t, f.drv, n) {
			t.Errorf("container %s was removed; it must be left alone", n)
		}
	}
}

func (f *fixture) gone(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if containerExists(t, f.drv, n) {
			t.Errorf("container %s is still there; the sweep should have removed it", n)
		}
	}
}

func TestSweepDecisions(t *testing.T) {
	f := &fixture{drv: openDocker(t), me: self(t), dead: deadProcess(t)}
	deadDrv, err := docker.OpenHost(deadHost)
	must(t, err)
	t.Cleanup(func() { deadDrv.Close() })

	cases := []sweepCase{
		{
			name:   "dead",
			reason: "no process has the recorded pid: its container goes, then its network, then its files",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				net := uniqueName(t, "net")
				createNetwork(t, f.drv, net)
				c := uniqueName(t, "dead")
				startContainer(t, f.drv, c, net)
				writeRun(t, runs, id, f.deadRecord(), []string{c}, []string{net})
				return []string{c, net}
			},
			decision: reaper.Reaped,
			because:  []string{"dead", fmt.Sprintf("pid %d", f.dead.PID)},
			removed:  []string{"sandbox $0: removed", "network $1: removed"},
			asked:    [][]string{{"$0"}, {"$1"}},
			check: func(t *testing.T, f *fixture, _ *reaper.Report, n []string) {
				f.gone(t, n[0])
				if networkExists(t, f.drv, n[1]) {
					t.Errorf("network %s is still there", n[1])
				}
			},
		},
		{
			name:   "dead, lists nothing",
			reason: "a record without line files: nothing to remove, the record is deleted (without a claim: no lock file is left either)",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				writeRun(t, runs, id, f.deadRecord(), nil, nil)
				return nil
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
		},
		{
			name:   "dead, empty line files",
			reason: "line files that list nothing: claimed, read, and deleted with the record",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				writeRun(t, runs, id, f.deadRecord(), []string{}, []string{})
				return nil
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
		},
		{
			name:   "dead, another boot",
			reason: "a record of another boot is dead whatever its pid (this process's own pid here)",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				r := recordOf(f.me, backend.Docker, f.drv.Endpoint())
				r.BootID = "00000000-0000-0000-0000-000000000000"
				writeRun(t, runs, id, r.Marshal(), []string{"rz-rtnever-" + id}, nil)
				return []string{"rz-rtnever-" + id}
			},
			decision: reaper.Reaped,
			because:  []string{"dead", "another boot"},
			removed:  []string{"sandbox $0: not found"},
			asked:    [][]string{{"$0"}},
		},
		{
			name:   "alive, this process",
			reason: "the owner runs with the recorded start: nothing of it is touched",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				c := uniqueName(t, "alive")
				startContainer(t, f.drv, c, "")
				writeRun(t, runs, id, recordOf(f.me, backend.Docker, f.drv.Endpoint()).Marshal(), []string{c}, nil)
				return []string{c}
			},
			decision: reaper.LeftAlone,
			because:  []string{"alive", fmt.Sprintf("pid %d", f.me.PID), "recorded start"},
			files:    []string{".json", ".sandboxes"},
			check:    func(t *testing.T, f *fixture, _ *reaper.Report, n []string) { f.alive(t, n[0]) },
		},
		{
			name:   "alive, a child",
			reason: "another live process, judged by its real start",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				child := startSleeper(t)
				idn, ok, err := ledger.Lookup(child)
				if err != nil || !ok {
					t.Fatalf("look up child %d: %v %v", child, ok, err)
				}
				c := uniqueName(t, "child")
				startContainer(t, f.drv, c, "")
				writeRun(t, runs, id, recordOf(idn, backend.Docker, f.drv.Endpoint()).Marshal(), []string{c}, nil)
				return []string{c, fmt.Sprint(child)}
			},
			decision: reaper.LeftAlone,
			because:  []string{"alive", "pid $1", "recorded start"},
			files:    []string{".json", ".sandboxes"},
			check:    func(t *testing.T, f *fixture, _ *reaper.Report, n []string) { f.alive(t, n[0]) },
		},
		{
			name:   "own run",
			reason: "WithOwnRun names this process's run, which is never swept even when its record says dead",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				c := uniqueName(t, "own")
				startContainer(t, f.drv, c, "")
				writeRun(t, runs, id, f.deadRecord(), []string{c}, nil)
				return []string{c}
			},
			opts:     func(id string) []reaper.Option { return []reaper.Option{reaper.WithOwnRun(id)} },
			decision: reaper.LeftAlone,
			because:  []string{"this process's own run"},
			files:    []string{".json", ".sandboxes"},
			check:    func(t *testing.T, f *fixture, _ *reaper.Report, n []string) { f.alive(t, n[0]) },
		},
		{
			name:   "other backend, msb",
			reason: "a docker process cannot remove msb sandboxes: the run waits for an msb process",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				r := recordOf(f.dead, backend.Msb, "")
				r.MsbPath = "/opt/msb/bin/msb"
				writeRun(t, runs, id, r.Marshal(), []string{"rz-msb-1"}, []string{"rz-net-msb"})
				return nil
			},
			decision: reaper.LeftAlone,
			because:  []string{"backend msb", "this sweep uses docker"},
			files:    []string{".json", ".networks", ".sandboxes"},
		},
		{
			name:   "other backend, microsandbox",
			reason: `Rust writes "microsandbox" for msb: the same other backend, left alone, reported as msb`,
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				writeRun(t, runs, id, rustRecord(f.dead, "microsandbox"), []string{"rz-msb-1"}, nil)
				return nil
			},
			decision: reaper.LeftAlone,
			because:  []string{"backend msb", "this sweep uses docker"},
			files:    []string{".json", ".sandboxes"},
		},
		{
			name:   "microsandbox under an msb sweep",
			reason: `"microsandbox" is msb: an msb sweep reaps a dead Rust-written run`,
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				writeRun(t, runs, id, rustRecord(f.dead, "microsandbox"), []string{"rz-msb-1", "rz-msb-2"}, nil)
				return nil
			},
			sweeper:  func(*testing.T, *fixture) backend.Backend { return stubBackend{name: backend.Msb} },
			decision: reaper.Reaped,
			because:  []string{"dead"},
			removed:  []string{"sandbox rz-msb-1: removed", "sandbox rz-msb-2: removed"},
			asked:    [][]string{{"rz-msb-1", "rz-msb-2"}},
		},
		{
			name:   "msb under a sweep whose backend says microsandbox",
			reason: "the alias holds both ways: a backend naming itself the Rust way reaps a dead msb run",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				writeRun(t, runs, id, recordOf(f.dead, backend.Msb, "").Marshal(), []string{"rz-msb-3"}, nil)
				return nil
			},
			sweeper:  func(*testing.T, *fixture) backend.Backend { return stubBackend{name: "microsandbox"} },
			decision: reaper.Reaped,
			because:  []string{"dead"},
			removed:  []string{"sandbox rz-msb-3: removed"},
			asked:    [][]string{{"rz-msb-3"}},
		},
		{
			name:   "other endpoint",
			reason: "a sweep against this engine never touches a run recorded against another",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				// The container is on this engine, to show it is not touched
				// even though this sweep could reach it.
				c := uniqueName(t, "ep")
				startContainer(t, f.drv, c, "")
				writeRun(t, runs, id, recordOf(f.dead, backend.Docker, "tcp://10.255.255.1:2375").Marshal(), []string{c}, nil)
				return []string{c}
			},
			decision: reaper.LeftAlone,
			because:  []string{"engine tcp://10.255.255.1:2375", "this sweep uses " + f.drv.Endpoint()},
			files:    []string{".json", ".sandboxes"},
			check:    func(t *testing.T, f *fixture, _ *reaper.Report, n []string) { f.alive(t, n[0]) },
		},
		{
			name:   "foreign record, engine named explicitly",
			reason: "another language's record names no engine, so it is taken to be on the default one: a sweep through an engine named explicitly must not forget its names as not found",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				c := uniqueName(t, "fx")
				startContainer(t, f.drv, c, "")
				writeRun(t, runs, id, []byte(fmt.Sprintf(`{"pid":%d,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker"}`, f.dead.PID)), []string{c}, nil)
				return []string{c}
			},
			sweeper: func(t *testing.T, f *fixture) backend.Backend {
				named, err := docker.OpenHost(f.drv.DaemonHost())
				must(t, err)
				t.Cleanup(func() { named.Close() })
				return named
			},
			decision: reaper.LeftAlone,
			because:  []string{"recorded without an engine", "named explicitly"},
			files:    []string{".json", ".sandboxes"},
			check:    func(t *testing.T, f *fixture, _ *reaper.Report, n []string) { f.alive(t, n[0]) },
		},
		{
			name:   "unknown, another pid namespace",
			reason: "a pid of another pid namespace cannot be looked up from here: left alone, and the reason says so",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				if f.me.PidNamespace == "" {
					t.Skip("pid namespaces are a Linux notion")
				}
				c := uniqueName(t, "ns")
				startContainer(t, f.drv, c, "")
				r := recordOf(f.dead, backend.Docker, f.drv.Endpoint())
				r.PidNamespace = "pid:[4026530001]"
				if r.PidNamespace == f.me.PidNamespace {
					r.PidNamespace = "pid:[4026530002]"
				}
				writeRun(t, runs, id, r.Marshal(), []string{c}, nil)
				return []string{c}
			},
			decision: reaper.LeftAlone,
			because:  []string{"unknown", "pid namespace", f.me.PidNamespace, "cannot be looked up"},
			files:    []string{".json", ".sandboxes"},
			check:    func(t *testing.T, f *fixture, _ *reaper.Report, n []string) { f.alive(t, n[0]) },
		},
		{
			name:   "unparseable, fresh",
			reason: "an unreadable record younger than an hour may be being written",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				c := uniqueName(t, "fresh")
				startContainer(t, f.drv, c, "")
				writeRun(t, runs, id, []byte(`{"pid": 12, "startedIso": "2026-`), []string{c}, nil)
				return []string{c}
			},
			decision: reaper.LeftAlone,
			because:  []string{"unreadable", "not valid JSON", "may be being written"},
			files:    []string{".json", ".sandboxes"},
			check:    func(t *testing.T, f *fixture, _ *reaper.Report, n []string) { f.alive(t, n[0]) },
		},
		{
			name:   "unparseable, stale",
			reason: "an unreadable record two hours old is abandoned: its names are reaped, its files deleted",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				c := uniqueName(t, "stale")
				startContainer(t, f.drv, c, "")
				writeRun(t, runs, id, []byte("\x00\xffgarbage"), []string{c}, nil)
				old := time.Now().Add(-2 * time.Hour)
				rec, sbx, _ := ledger.Paths(runs, id)
				must(t, os.Chtimes(rec, old, old))
				must(t, os.Chtimes(sbx, old, old))
				return []string{c}
			},
			decision: reaper.Reaped,
			because:  []string{"unreadable", "2h0m", "abandoned"},
			removed:  []string{"sandbox $0: removed"},
			asked:    [][]string{{"$0"}},
			check:    func(t *testing.T, f *fixture, _ *reaper.Report, n []string) { f.gone(t, n[0]) },
		},
		{
			name: "removal failed",
			reason: "the engine is unreachable: nothing is known to be gone, so every name stays listed, " +
				"the record stays, and the report is not clean",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				writeRun(t, runs, id, recordOf(f.dead, backend.Docker, deadDrv.Endpoint()).Marshal(),
					[]string{"rz-rtunreach-1", "rz-rtunreach-2"}, []string{"rz-net-unreach"})
				return nil
			},
			sweeper:  func(*testing.T, *fixture) backend.Backend { return deadDrv },
			decision: reaper.Kept,
			because:  []string{"dead"},
			kept: []string{
				"sandbox rz-rtunreach-1: remove container rz-rtunreach-1: engine unreachable",
				"sandbox rz-rtunreach-2: remove container rz-rtunreach-2: engine unreachable",
				"network rz-net-unreach: remove network rz-net-unreach: engine unreachable",
			},
			asked: [][]string{{"rz-rtunreach-1", "rz-rtunreach-2"}, {"rz-net-unreach"}},
			files: []string{".json", ".networks", ".sandboxes"},
			check: func(t *testing.T, f *fixture, rep *reaper.Report, _ []string) {
				if rep.Clean() {
					t.Errorf("Report.Clean() = true with a run kept back")
				}
				runs := filepath.Join(rep.CacheDir, ledger.RunsDir)
				id := rep.Runs[0].ID
				_, sbx, nets := ledger.Paths(runs, id)
				assertFile(t, sbx, "rz-rtunreach-1\nrz-rtunreach-2\n")
				assertFile(t, nets, "rz-net-unreach\n")
			},
		},
		{
			name:   "not found",
			reason: "names the engine has never heard of leave the ledger, and so does the run",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				s, n := uniqueName(t, "never"), uniqueName(t, "netnever")
				writeRun(t, runs, id, f.deadRecord(), []string{s}, []string{n})
				return []string{s, n}
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
			removed:  []string{"sandbox $0: not found", "network $1: not found"},
			asked:    [][]string{{"$0"}, {"$1"}},
		},
		{
			name: "network in use",
			reason: "a container the run does not list holds its network: kept, with its record; " +
				"once that container is gone, the next sweep removes the network and the files",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				net := uniqueName(t, "netuse")
				createNetwork(t, f.drv, net)
				c := uniqueName(t, "holder")
				startContainer(t, f.drv, c, net)
				writeRun(t, runs, id, f.deadRecord(), nil, []string{net})
				return []string{net, c}
			},
			decision: reaper.Kept,
			because:  []string{"dead"},
			kept:     []string{"network $0: still in use"},
			// Asked twice: once more after the containers, in case one of
			// them was what held it.
			asked: [][]string{nil, {"$0", "$0"}},
			files: []string{".json", ".networks"},
			check: func(t *testing.T, f *fixture, rep *reaper.Report, n []string) {
				if rep.Clean() {
					t.Errorf("Report.Clean() = true with a network kept back")
				}
				if !networkExists(t, f.drv, n[0]) {
					t.Fatalf("network %s was removed while in use", n[0])
				}
				removeContainer(t, f.drv, n[1])
				rep2, err := reaper.Sweep(context.Background(), f.drv, reaper.WithCacheDir(rep.CacheDir))
				must(t, err)
				rr := only(t, rep2)
				if rr.Decision != reaper.Reaped || len(rr.Removed) != 1 || rr.Removed[0].String() != "network "+n[0]+": removed" {
					t.Errorf("second sweep: %s %q removed %v kept %v; want the network removed", rr.Decision, rr.Reason, rr.Removed, rr.Kept)
				}
				if networkExists(t, f.drv, n[0]) {
					t.Errorf("network %s still there after the second sweep", n[0])
				}
				if left := listDir(t, filepath.Join(rep.CacheDir, ledger.RunsDir)); len(left) > 0 {
					t.Errorf("after the second sweep the runs folder holds %q", left)
				}
			},
		},
		{
			name:   "rejected lines",
			reason: "lines that are not names are reported and never reach the backend; the valid names are reaped",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				c := uniqueName(t, "rej")
				startContainer(t, f.drv, c, "")
				pw := filepath.Join(t.TempDir(), "PWNED")
				content := "$(touch " + pw + ")\n`touch " + pw + "`\n-f\n" + c + "\nrz-a;touch " + pw + "\n" +
					strings.Repeat("x", 200) + "\n\x00rz-nul\nrz-\xc3\xa9\n  \t\nrz-rtnever-" + id + "\n"
				rec, sbx, _ := ledger.Paths(runs, id)
				must(t, os.WriteFile(rec, f.deadRecord(), 0o600))
				must(t, os.WriteFile(sbx, []byte(content), 0o600))
				return []string{c, "rz-rtnever-" + id, pw}
			},
			decision: reaper.Reaped,
			because:  []string{"dead"},
			removed:  []string{"sandbox $0: removed", "sandbox $1: not found"},
			rejected: 7,
			asked:    [][]string{{"$0", "$1"}},
			check: func(t *testing.T, f *fixture, rep *reaper.Report, n []string) {
				f.gone(t, n[0])
				for _, rj := range rep.Runs[0].Rejected {
					if rj.File != rep.Runs[0].ID+".sandboxes" || rj.Line < 1 {
						t.Errorf("rejected %+v: want the file and line named", rj)
					}
				}
				if _, err := os.Stat(n[2]); err == nil {
					t.Errorf("%s exists: a line was run", n[2])
				}
			},
		},
		{
			name:   "symlinked .sandboxes",
			reason: "a line file that is a symbolic link is not followed: its target's names are never read, and the run is kept",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				victim := uniqueName(t, "victim")
				startContainer(t, f.drv, victim, "")
				target := filepath.Join(t.TempDir(), "elsewhere")
				must(t, os.WriteFile(target, []byte(victim+"\n"), 0o600))
				writeRun(t, runs, id, f.deadRecord(), nil, nil)
				_, sbx, _ := ledger.Paths(runs, id)
				must(t, os.Symlink(target, sbx))
				return []string{victim, target}
			},
			decision: reaper.Kept,
			because:  []string{"dead"},
			files:    []string{".json", ".sandboxes"},
			check: func(t *testing.T, f *fixture, rep *reaper.Report, n []string) {
				f.alive(t, n[0])
				rr := rep.Runs[0]
				if !slices.ContainsFunc(rr.Problems, func(p string) bool { return strings.Contains(p, "symbolic link") }) {
					t.Errorf("problems %q do not mention the symbolic link", rr.Problems)
				}
				_, sbx, _ := ledger.Paths(filepath.Join(rep.CacheDir, ledger.RunsDir), rr.ID)
				if got, err := os.Readlink(sbx); err != nil || got != n[1] {
					t.Errorf("the link is now %q (%v), want it left pointing at %s", got, err, n[1])
				}
				assertFile(t, n[1], n[0]+"\n")
			},
		},
		{
			name:   "dry run",
			reason: "DryRun decides and reports, and touches nothing: no removal, no file changed, no lock taken",
			prepare: func(t *testing.T, f *fixture, runs, id string) []string {
				c := uniqueName(t, "dry")
				startContainer(t, f.drv, c, "")
				writeRun(t, runs, id, f.deadRecord(), []string{c}, []string{"rz-net-dry"})
				return []string{c}
			},
			opts:     func(string) []reaper.Option { return []reaper.Option{reaper.DryRun()} },
			decision: reaper.WouldReap,
			because:  []string{"dead"},
			removed:  []string{"sandbox $0: would be removed", "network rz-net-dry: would be removed"},
			files:    []string{".json", ".networks", ".sandboxes"},
			check: func(t *testing.T, f *fixture, rep *reaper.Report, n []string) {
				f.alive(t, n[0])
				if !rep.DryRun {
					t.Errorf("Report.DryRun = false")
				}
			},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cache := t.TempDir()
			runs := runsDir(t, cache)
			id := randHex(t, 8)
			names := tc.prepare(t, f, runs, id)
			r := strings.NewReplacer("$0", at(names, 0), "$1", at(names, 1), "$2", at(names, 2))
			before := snapshot(t, runs)

			var sweeper backend.Backend = f.drv
			if tc.sweeper != nil {
				sweeper = tc.sweeper(t, f)
			}
			rec := &recorder{Backend: sweeper}
			opts := []reaper.Option{reaper.WithCacheDir(cache)}
			if tc.opts != nil {
				opts = append(opts, tc.opts(id)...)
			}
			rep, err := reaper.Sweep(context.Background(), rec, opts...)
			if err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			rr := only(t, rep)
			var out bytes.Buffer
			rep.WriteTo(&out)
			t.Logf("%s (%s)\n%s", tc.name, tc.reason, out.String())

			if rr.ID != id || rr.Decision != tc.decision {
				t.Errorf("run %s: decision %q, want %q (%s)\nreason: %s", rr.ID, rr.Decision, tc.decision, tc.reason, rr.Reason)
			}
			for _, w := range tc.because {
				if w = r.Replace(w); !strings.Contains(rr.Reason, w) {
					t.Errorf("reason %q does not say %q", rr.Reason, w)
				}
			}
			checkItems(t, "removed", rr.Removed, tc.removed, r)
			checkItems(t, "kept", rr.Kept, tc.kept, r)
			if len(rr.Rejected) != tc.rejected {
				t.Errorf("rejected %d lines %v, want %d", len(rr.Rejected), rr.Rejected, tc.rejected)
			}
			if (tc.decision == reaper.Kept) == rep.Clean() {
				t.Errorf("Report.Clean() = %v with decision %s", rep.Clean(), rr.Decision)
			}

			sbx, nets := rec.asked()
			var want [2][]string
			for i := range tc.asked {
				for _, n := range tc.asked[i] {
					want[i] = append(want[i], r.Replace(n))
				}
			}
			if !slices.Equal(sbx, want[0]) || !slices.Equal(nets, want[1]) {
				t.Errorf("the backend was asked to remove sandboxes %q and networks %q, want %q and %q", sbx, nets, want[0], want[1])
			}
			for _, n := range append(sbx, nets...) {
				if !ledger.ValidName(n) {
					t.Errorf("the backend was handed %q, which is not a valid name", n)
				}
			}

			var wantFiles []string
			for _, s := range tc.files {
				wantFiles = append(wantFiles, id+s)
			}
			if got := listDir(t, runs); !slices.Equal(got, wantFiles) {
				t.Errorf("runs folder holds %q, want %q", got, wantFiles)
			}
			if tc.decision == reaper.LeftAlone || tc.decision == reaper.WouldReap {
				if after := snapshot(t, runs); !mapsEqual(before, after) {
					t.Errorf("the run's files changed:\nbefore %q\nafter  %q", before, after)
				}
			}
			if tc.check != nil {
				tc.check(t, f, rep, names)
			}
		})
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return fmt.Sprintf("$%d", i)
}

// only returns the report's one run.
func only(t *testing.T, rep *reaper.Report) reaper.RunReport {
	t.Helper()
	if len(rep.Runs) != 1 {
		t.Fatalf("the sweep saw %d runs, want 1: %+v", len(rep.Runs), rep.Runs)
	}
	return rep.Runs[0]
}

func checkItems(t *testing.T, what string, got []reaper.Item, want []string, r *strings.Replacer) {
	t.Helper()
	var w []string
	for _, s := range want {
		w = append(w, r.Replace(s))
	}
	ok := len(got) == len(w)
	for i := 0; ok && i < len(w); i++ {
		ok = strings.HasPrefix(got[i].String(), w[i])
	}
	if !ok {
		t.Errorf("%s %q, want items starting %q", what, got, w)
	}
}

func assertFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want {
		t.Errorf("%s = %q (%v), want %q", path, b, err, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// rustRecord is a record as the Rust member writes it: pretty-printed,
// whole seconds, none of rightsize-go's fields.
func rustRecord(id ledger.Identity, backendName string) []byte {
	return fmt.Appendf(nil, "{\n  \"pid\": %d,\n  \"startedIso\": %q,\n  \"backend\": %q\n}", id.PID, id.Start.UTC().Format("2006-01-02T15:04:05Z"), backendName)
}

// startSleeper starts `sleep 600`, ended when the test ends, and returns
// its pid.
func startSleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// TestSweepDeletesStaleLockFiles: a sweeper killed between deleting a run's
// files and its lock file leaves the lock file alone in the folder. The
// next sweep deletes it once it is old, and only when no process holds it
// and no run goes with it.
func TestSweepDeletesStaleLockFiles(t *testing.T) {
	cache := t.TempDir()
	runs := runsDir(t, cache)
	old := time.Now().Add(-2 * time.Minute)
	put := func(name string, mtime time.Time) string {
		p := filepath.Join(runs, name)
		must(t, os.WriteFile(p, nil, 0o600))
		must(t, os.Chtimes(p, mtime, mtime))
		return p
	}
	put("0badc0de"+ledger.LockExt, old)         // abandoned: goes
	put("0fresh01"+ledger.LockExt, time.Now())  // may be mid-claim: stays
	held := put("0held001"+ledger.LockExt, old) // a live claim: stays
	put("0live001"+ledger.LockExt, old)         // its run is still here: stays
	rec, _ := json.Marshal(recordOf(self(t), "docker", ""))
	writeRun(t, runs, "0live001", rec, []string{"rz-0live001-1"}, nil)

	lock := flock.New(held)
	if got, err := lock.TryLock(); err != nil || !got {
		t.Fatalf("lock %s: %v, %v", held, got, err)
	}
	defer lock.Unlock()

	before := listDir(t, runs)
	if _, err := reaper.Sweep(context.Background(), stubBackend{name: "docker"}, reaper.WithCacheDir(cache), reaper.DryRun()); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, runs); !slices.Equal(got, before) {
		t.Fatalf("a dry run changed the folder: %q, want %q", got, before)
	}
	if _, err := reaper.Sweep(context.Background(), stubBackend{name: "docker"}, reaper.WithCacheDir(cache)); err != nil {
		t.Fatal(err)
	}
	want := []string{"0fresh01.lock", "0held001.lock", "0live001.json", "0live001.lock", "0live001.sandboxes"}
	if got := listDir(t, runs); !slices.Equal(got, want) {
		t.Errorf("after the sweep the folder holds %q, want %q", got, want)
	}
}
