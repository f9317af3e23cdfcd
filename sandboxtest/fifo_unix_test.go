//go:build unix

package sandboxtest_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/internal/pidns"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// TestFirstStartFIFOs: FIFOs where a test process's first Start opens
// files of the cache dir — a dead run's lock file (runs/<id>.lock), a dead
// owner's stub (fates/.<id>.owner), a keep-alive's creation lock
// (reuse/<hash>.lock) — block nothing: Start finishes at once, the run
// whose lock is a FIFO is left alone and said so on stderr, the other is
// reaped, and the keep-alive start fails saying what is in the way.
func TestFirstStartFIFOs(t *testing.T) {
	t.Parallel()
	img := testimage.Busybox(t)
	r := newRig(t)
	d, err := docker.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cache := t.TempDir()
	runs, err := ledger.EnsureSubdir(cache, ledger.RunsDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.EnsureSubdir(cache, ledger.FatesDir); err != nil {
		t.Fatal(err)
	}
	reuse, err := ledger.EnsureSubdir(cache, ledger.ReuseDir)
	if err != nil {
		t.Fatal(err)
	}
	// Dead in this pid namespace, wherever the test runs.
	rec := ledger.Record{PID: 4194033, StartedISO: "2026-11-29T20:36:06.950Z", Backend: "docker", Endpoint: d.Endpoint(), PidNamespace: pidns.Self()}.Marshal()
	locked, stubbed := "lock"+nonce(t)[:4], "stub"+nonce(t)[:4]
	for _, id := range []string{locked, stubbed} {
		name := "rz-" + id + "-1"
		if _, err := r.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{Name: name, Config: &container.Config{
			Image: img, Cmd: []string{"sleep", "300"}, Labels: map[string]string{docker.LabelRunID: id},
		}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.remove(name) })
		if err := os.WriteFile(ledger.RecordPath(runs, id), rec, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ledger.LinePath(runs, id, ledger.SandboxKind), []byte(name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n := nonce(t)
	hash := sandboxtest.ReuseIdentity(reuseSpec(img, n)).Hash()
	t.Cleanup(func() { r.remove(ledger.ReuseName(hash)) })
	lockFIFO := filepath.Join(runs, locked+ledger.LockExt)
	fifos := []string{lockFIFO, ledger.OwnerStubPath(cache, stubbed), filepath.Join(reuse, hash+".lock")}
	for _, p := range fifos {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Were an open blocked on one, the test would end: free it.
	t.Cleanup(func() {
		for _, p := range fifos {
			if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	})

	h := startHelper(t, "fifo-start", cache, "RIGHTSIZE_REAPER=sweep", "TESTCONTAINERS_RYUK_DISABLED=true", "RZ_TEST_IMAGE="+img,
		sandboxtest.EnvReuse+"=1", "RZ_TEST_REUSE_NONCE="+n, "TMPDIR="+t.TempDir())
	h.Within = 45 * time.Second // far past a first Start; a blocked open is never freed
	started := h.Expect("name")
	t.Cleanup(func() { r.remove(started) })
	fatal, _ := strconv.Unquote(h.Expect("reuse"))
	h.Finish()

	if want := lockFIFO + " is a named pipe (FIFO), not a regular file"; !strings.Contains(h.Stderr(), "run "+locked+" was not reaped: ") || !strings.Contains(h.Stderr(), want) {
		t.Errorf("stderr does not say run %s was not reaped because %s:\n%s", locked, want, h.Stderr())
	}
	if _, ok := r.inspect("rz-" + locked + "-1"); !ok {
		t.Errorf("the container of run %s, which was not claimed, is gone", locked)
	}
	if _, ok := r.inspect("rz-" + stubbed + "-1"); ok {
		t.Errorf("the container of run %s, whose owner's stub is a FIFO, was not reaped", stubbed)
	}
	if want := filepath.Join(reuse, hash+".lock") + " is a named pipe (FIFO)"; !strings.Contains(fatal, want) {
		t.Errorf("the keep-alive Start failed with %q; want it to say %s", fatal, want)
	}
}

func init() { helperRoles["fifo-start"] = helperFIFOStart }

// helperFIFOStart starts an ordinary sandbox, then the keep-alive of
// RZ_TEST_REUSE_NONCE, saying what became of each, and blocks.
func helperFIFOStart(t *testing.T) {
	img := os.Getenv("RZ_TEST_IMAGE")
	g := sandboxtest.Start(t, sandboxtest.Spec{Image: img, Cmd: []string{"sleep", "300"}})
	proctest.Say("name", g.Name())
	rec := &recordingTB{TB: t}
	rec.run(func(tb testing.TB) { sandboxtest.Start(tb, reuseSpec(img, os.Getenv("RZ_TEST_REUSE_NONCE"))) })
	proctest.Say("reuse", strconv.Quote(strings.Join(rec.fatals, "; ")))
	proctest.Block()
}
