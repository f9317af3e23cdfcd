package reaper_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/backend/msb"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// The systemf member (@systemfsoftware/rightsize, packages/rightsize of
// systemfsoftware/systemfsoftware at 9461ab87) shares the ledger: its
// record is runs/<id>.json as Node writes it, and its names are in
// runs/<id>.jsonl, one JSON entry a line (lifecycle/hygiene/ledger.ts).
// It labels its containers dev.rightsize.runId (backend-docker/labels.ts)
// and creates its networks with a name and nothing else
// (backend-docker/networks.ts createBody).

// systemfRecord is a record as the systemf member writes it:
// JSON.stringify({pid, startedIso, backend}), startedIso from toISOString.
func systemfRecord(pid int, started time.Time, backendName string) []byte {
	return fmt.Appendf(nil, `{"pid":%d,"startedIso":%q,"backend":%q}`, pid, ledger.FormatISO(started), backendName)
}

// Entries as it writes them (ledger.ts): a network once ensured; a
// sandbox before its create, then with the engine's id after it.
func systemfNetwork(name string) string { return fmt.Sprintf(`{"kind":"network","id":%q}`, name) }
func systemfSandbox(backendName, name, id string) string {
	if id == "" {
		return fmt.Sprintf(`{"kind":"sandbox","backend":%q,"name":%q}`, backendName, name)
	}
	return fmt.Sprintf(`{"kind":"sandbox","backend":%q,"name":%q,"id":%q}`, backendName, name, id)
}

// writeSystemfRun writes a run's record and entries file as the systemf
// member does: each line ended, the file written whole.
func writeSystemfRun(t testing.TB, runs, id string, record []byte, entries ...string) {
	t.Helper()
	must(t, os.WriteFile(ledger.RecordPath(runs, id), record, 0o600))
	if len(entries) > 0 {
		must(t, os.WriteFile(ledger.EntriesPath(runs, id), []byte(strings.Join(entries, "\n")+"\n"), 0o600))
	}
}

// systemfNetworkCreate creates a network as the systemf member does: a
// name, no label. It is removed when the test ends.
func systemfNetworkCreate(t *testing.T, d *docker.Driver) string {
	t.Helper()
	name := "rz-net-" + randHex(t, 8)
	if _, err := d.Client().NetworkCreate(context.Background(), name, client.NetworkCreateOptions{}); err != nil {
		t.Fatalf("create network %s: %v", name, err)
	}
	t.Cleanup(func() { d.Client().NetworkRemove(context.Background(), name, client.NetworkRemoveOptions{}) })
	return name
}

// startSystemfContainer starts a busybox container named name, labelled as
// the systemf member labels its run's containers (dev.rightsize.runId
// only), on network net; removed by name when the test ends. It returns
// its id.
func startSystemfContainer(t *testing.T, d *docker.Driver, name, runID, net string) string {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { removeContainer(t, d, name) })
	res, err := d.Client().ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: testimage.Busybox(t), Cmd: []string{"sleep", "3600"}, Labels: map[string]string{labelTest: "reaper", docker.LabelRunID: runID}},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(net)},
	})
	if err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	if _, err := d.Client().ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container %s: %v", name, err)
	}
	return res.ID
}

// TestSweepSystemfRunWhole: a dead run of the systemf member is reaped
// whole, as its own sweep reaps it (its sandboxes, then its networks, then
// its .jsonl and .json): its labelled container, and the unlabelled
// network the container is attached to, made after the run's owner
// started. A network of the same name made before the owner started is
// not the run's, and stays.
func TestSweepSystemfRunWhole(t *testing.T) {
	proctest.NeedHostPidNamespace(t) // its record names no pid namespace
	drv := openDocker(t)
	if !drv.DefaultEndpoint() {
		t.Skipf("the engine is %s: the other members' runs, which record none, are judged on the default engine only", drv.Endpoint())
	}
	ctx := context.Background()
	dead := deadProcess(t)

	t.Run("dead run", func(t *testing.T) {
		cache := t.TempDir()
		runs := runsDir(t, cache)
		id := randHex(t, 8)
		net := systemfNetworkCreate(t, drv)
		name := "rz-" + id + "-1"
		cid := startSystemfContainer(t, drv, name, id, net)
		writeSystemfRun(t, runs, id, systemfRecord(dead.PID, dead.Start, "docker"),
			systemfNetwork(net), systemfSandbox("docker", name, cid))

		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
		must(t, err)
		rr := runReport(t, rep, id)
		if rr.Decision != reaper.Reaped || !rep.Clean() {
			t.Errorf("run %s: %s (%s), kept %v, not owned %v; want it reaped whole", id, rr.Decision, rr.Reason, rr.Kept, rr.NotOwned)
		}
		if containerExists(t, drv, name) {
			t.Errorf("its container %s is still there", name)
		}
		if networkExists(t, drv, net) {
			t.Errorf("its unlabelled network %s is still there", net)
		}
		if left := listDir(t, runs); len(left) != 0 {
			t.Errorf("the runs folder holds %q; want its .json and .jsonl gone", left)
		}
	})

	t.Run("a network older than the run", func(t *testing.T) {
		cache := t.TempDir()
		runs := runsDir(t, cache)
		id := randHex(t, 8)
		net := systemfNetworkCreate(t, drv)
		name := "rz-" + id + "-1"
		startSystemfContainer(t, drv, name, id, "none")
		// The owner, as its record says, started an hour after the network
		// of that name was made: not the run's network.
		writeSystemfRun(t, runs, id, systemfRecord(dead.PID, time.Now().Add(time.Hour), "docker"),
			systemfNetwork(net), systemfSandbox("docker", name, ""))

		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
		must(t, err)
		rr := runReport(t, rep, id)
		if len(rr.NotOwned) != 1 || rr.NotOwned[0].Name != net || !strings.Contains(rr.NotOwned[0].Note, "before the run's owner started") {
			t.Errorf("run %s: %s (%s), not owned %v, kept %v, removed %v; want the network left alone as made before the owner started", id, rr.Decision, rr.Reason, rr.NotOwned, rr.Kept, rr.Removed)
		}
		if !networkExists(t, drv, net) {
			t.Errorf("network %s, made before the run's owner started, was removed", net)
		}
	})
}

// TestSweepKeepsWhatItCannotRead: a run with a file, or an entries line,
// that no reader here understands keeps its record (and that file, and
// that line) for the member that wrote it, which may judge and reap it;
// what Go does understand of the run is reaped all the same, and the
// sweep is clean.
func TestSweepKeepsWhatItCannotRead(t *testing.T) {
	proctest.NeedHostPidNamespace(t)
	drv := openDocker(t)
	if !drv.DefaultEndpoint() {
		t.Skipf("the engine is %s: the other members' runs, which record none, are judged on the default engine only", drv.Endpoint())
	}
	dead := deadProcess(t)
	volume := `{"kind":"volume","id":"rz-vol-0a1b2c3d"}`
	for _, tc := range []struct {
		name        string
		extra       string // a file of the run's, beside its record
		line        string // an entries line beside its sandbox's
		wantEntries string // what its entries file holds after
	}{
		{name: "an entries line of a kind not known here", line: volume, wantEntries: volume + "\n"},
		{name: "a file not known here", extra: ".snapshots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			runs := runsDir(t, cache)
			id := randHex(t, 8)
			name := "rz-" + id + "-1"
			startSystemfContainer(t, drv, name, id, "none")
			entries := []string{systemfSandbox("docker", name, "")}
			if tc.line != "" {
				entries = append(entries, tc.line)
			}
			record := systemfRecord(dead.PID, dead.Start, "docker")
			writeSystemfRun(t, runs, id, record, entries...)
			if tc.extra != "" {
				must(t, os.WriteFile(filepath.Join(runs, id+tc.extra), []byte("{}\n"), 0o600))
			}

			rep, err := reaper.Sweep(context.Background(), drv, reaper.WithCacheDir(cache))
			must(t, err)
			rr := runReport(t, rep, id)
			if containerExists(t, drv, name) {
				t.Errorf("its container %s is still there", name)
			}
			if rr.Decision != reaper.Kept || len(rr.ForMember) != 1 || !rep.Clean() {
				t.Errorf("run %s: %s (%s), for its member %q, clean %v; want it kept for its member, and the sweep clean", id, rr.Decision, rr.Reason, rr.ForMember, rep.Clean())
			}
			if b, err := os.ReadFile(ledger.RecordPath(runs, id)); err != nil || string(b) != string(record) {
				t.Errorf("its record is %q (%v); want it as its member wrote it", b, err)
			}
			got, err := os.ReadFile(ledger.EntriesPath(runs, id))
			switch {
			case tc.wantEntries == "" && err == nil:
				t.Errorf("its entries file holds %q; want it gone with the sandbox it listed", got)
			case tc.wantEntries != "" && string(got) != tc.wantEntries:
				t.Errorf("its entries file holds %q (%v); want %q", got, err, tc.wantEntries)
			}
			if tc.extra != "" {
				if _, err := os.Stat(filepath.Join(runs, id+tc.extra)); err != nil {
					t.Errorf("its %s file: %v", tc.extra, err)
				}
			}
		})
	}
}

// TestSweepSystemfMsbRun: a dead msb run of the systemf member (its record
// carries no msbPath) is reaped through the sweeping process's own msb:
// its sandbox is stopped and removed, then its files deleted. The msb
// here is the backend's stand-in (internal/backend/msb/testdata), a real
// process holding the sandbox as msb's attached `run` does.
func TestSweepSystemfMsbRun(t *testing.T) {
	proctest.NeedHostPidNamespace(t)
	standin, err := filepath.Abs(filepath.Join("..", "backend", "msb", "testdata", "msb-standin"))
	must(t, err)
	state := t.TempDir()
	t.Setenv(msb.EnvPath, standin)
	t.Setenv("MSB_STANDIN_STATE", state)
	t.Setenv("MSB_STANDIN_LIFETIME", "120")
	for _, k := range []string{"MSB_STANDIN_DB_ERRORS", "MSB_STANDIN_RM_ERROR", "MSB_STANDIN_RUN_ERROR"} {
		t.Setenv(k, "")
	}
	id := randHex(t, 8)
	name := "rz-" + id + "-1"
	run := exec.Command(standin, "run", "--name", name, "alpine:3.19")
	must(t, run.Start())
	t.Cleanup(func() { run.Process.Kill(); run.Wait() })
	sandbox := filepath.Join(state, "sandboxes", name)
	waitFor(t, 10*time.Second, "the stand-in's sandbox running", func() bool {
		b, _ := os.ReadFile(sandbox)
		return strings.Contains(string(b), "status=Running")
	})

	cache := t.TempDir()
	runs := runsDir(t, cache)
	dead := deadProcess(t)
	writeSystemfRun(t, runs, id, systemfRecord(dead.PID, dead.Start, "msb"), systemfSandbox("msb", name, ""))
	drv, err := msb.Open(context.Background())
	must(t, err)
	rep, err := reaper.Sweep(context.Background(), drv, reaper.WithCacheDir(cache))
	must(t, err)
	if rr := runReport(t, rep, id); rr.Decision != reaper.Reaped {
		t.Errorf("run %s: %s (%s); want it reaped", id, rr.Decision, rr.Reason)
	}
	if _, err := os.Stat(sandbox); err == nil {
		t.Errorf("its msb sandbox %s is still there", name)
	}
	if left := listDir(t, runs); len(left) != 0 {
		t.Errorf("the runs folder holds %q", left)
	}
}

// TestSweepStrandedLines: the systemf member's sweep of another member's
// dead run deletes its .json (and a .jsonl it has none of) and leaves
// its .sandboxes and .networks; the Node member prunes its record while it
// lives. Go reaps such lines once their run is dead by every rule it has:
// by the copy of the record it kept when it last left the run alone (its
// pid, its start), or, with none, when the lines were last written before
// this boot. Lines written in this boot with no copy of their record stay.
func TestSweepStrandedLines(t *testing.T) {
	proctest.NeedHostPidNamespace(t)
	drv := openDocker(t)
	if !drv.DefaultEndpoint() {
		t.Skipf("the engine is %s: the other members' runs, which record none, are judged on the default engine only", drv.Endpoint())
	}
	ctx := context.Background()

	t.Run("by the copy of its record", func(t *testing.T) {
		cache := t.TempDir()
		runs := runsDir(t, cache)
		id := randHex(t, 8)
		owner := exec.Command("sleep", "600")
		must(t, owner.Start())
		t.Cleanup(func() { owner.Process.Kill(); owner.Wait() })
		me, ok, err := ledger.Lookup(owner.Process.Pid)
		if err != nil || !ok {
			t.Fatalf("look up the owner: %v", err)
		}
		net := systemfNetworkCreate(t, drv)
		name := "rz-" + id + "-1"
		startSystemfContainer(t, drv, name, id, net)
		// As rightsize-node writes it.
		writeRun(t, runs, id, systemfRecord(me.PID, me.Start, "docker"), []string{name}, []string{net})

		rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
		must(t, err)
		if rr := runReport(t, rep, id); rr.Decision != reaper.LeftAlone || !containerExists(t, drv, name) {
			t.Fatalf("live run %s: %s (%s); want it left alone", id, rr.Decision, rr.Reason)
		}
		// The owner dies, and the systemf member's sweep (ledger.ts
		// deleteRunFiles) deletes the record and its own file.
		owner.Process.Kill()
		owner.Wait()
		must(t, os.Remove(ledger.RecordPath(runs, id)))
		os.Remove(ledger.EntriesPath(runs, id))

		rep, err = reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
		must(t, err)
		rr := runReport(t, rep, id)
		if rr.Decision != reaper.Reaped || !strings.Contains(rr.Reason, "no process has pid "+strconv.Itoa(me.PID)) {
			t.Errorf("run %s, its record deleted: %s (%s), kept %v; want it reaped, its owner judged dead", id, rr.Decision, rr.Reason, rr.Kept)
		}
		if containerExists(t, drv, name) || networkExists(t, drv, net) {
			t.Errorf("its container %s or network %s is still there", name, net)
		}
		if left := listDir(t, runs); len(left) != 0 {
			t.Errorf("the runs folder holds %q", left)
		}
	})

	t.Run("written before this boot", func(t *testing.T) {
		boot := bootInstant(t)
		for _, before := range []bool{true, false} {
			cache := t.TempDir()
			runs := runsDir(t, cache)
			id := randHex(t, 8)
			name := "rz-" + id + "-1"
			startSystemfContainer(t, drv, name, id, "none")
			writeRun(t, runs, id, nil, []string{name}, nil)
			if before {
				old := boot.Add(-time.Hour)
				must(t, os.Chtimes(ledger.LinePath(runs, id, ledger.SandboxKind), old, old))
			}
			rep, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache))
			must(t, err)
			rr := runReport(t, rep, id)
			gone := !containerExists(t, drv, name)
			switch {
			case before && (rr.Decision != reaper.Reaped || !gone || len(listDir(t, runs)) != 0):
				t.Errorf("lines last written before this boot: %s (%s), container gone %v, files %q; want it reaped", rr.Decision, rr.Reason, gone, listDir(t, runs))
			case !before && (rr.Decision != reaper.LeftAlone || gone || !slices.Equal(listDir(t, runs), []string{id + ledger.SandboxesExt})):
				t.Errorf("lines written in this boot, no record: %s (%s), container gone %v; want them left alone", rr.Decision, rr.Reason, gone)
			}
		}
	})
}

// bootInstant is when this machine booted, as /proc/stat says.
func bootInstant(t *testing.T) time.Time {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	must(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			must(t, err)
			return time.Unix(s, 0)
		}
	}
	t.Fatal("no btime in /proc/stat")
	return time.Time{}
}

// waitFor polls cond until it holds, or fails the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
