package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// keepAliveUser is a test process of its own (this test binary,
// re-executed) that adopts or creates a keep-alive sandbox with its own
// cache dir, as a user's test would.
func keepAliveUser(t *testing.T, cache, tmp, nonce, img string, extra ...string) *proctest.Helper {
	t.Helper()
	h := proctest.StartHelper(t, proctest.Spec{
		Name: "keep-alive user",
		Argv: proctest.TestArgv("TestKeepAliveUserHelper", "-test.timeout=3m"),
		Env: proctest.Environ(func(k string) bool { return strings.HasPrefix(k, "RIGHTSIZE_") || k == "TMPDIR" },
			append([]string{"RZ_TEST_KEEPALIVE_USER=1", ledger.EnvCacheDir + "=" + cache, "TMPDIR=" + tmp,
				"RIGHTSIZE_REUSE=1", "RIGHTSIZE_REAPER=sweep", "TESTCONTAINERS_RYUK_DISABLED=true",
				"RZ_TEST_NONCE=" + nonce, "RZ_TEST_IMAGE=" + img}, extra...)...),
	})
	h.Within = 2 * time.Minute
	return h
}

func keepAliveSpec(img, nonce string) sandboxtest.Spec {
	return sandboxtest.Spec{Image: img, Cmd: []string{"sleep", "3600"}, Env: map[string]string{"RZ_TEST_NONCE": nonce}, Reuse: true}
}

// TestKeepAliveUserHelper is keepAliveUser's process: it starts the
// keep-alive (after a "go" when RZ_TEST_WAIT=1), says its id, and blocks.
func TestKeepAliveUserHelper(t *testing.T) {
	if os.Getenv("RZ_TEST_KEEPALIVE_USER") != "1" {
		t.Skip("the helper process of TestReusePruneSeesEveryProcess")
	}
	if os.Getenv("RZ_TEST_WAIT") == "1" {
		if err := proctest.WaitGo(); err != nil {
			t.Fatal(err)
		}
	}
	g := sandboxtest.Start(t, keepAliveSpec(os.Getenv("RZ_TEST_IMAGE"), os.Getenv("RZ_TEST_NONCE")))
	proctest.Say("id", g.Container().GetContainerID())
	proctest.Block()
}

// TestReusePruneSeesEveryProcess: `reuse prune` keeps a keep-alive sandbox
// that a test process with another cache dir uses, whether or not its own
// registry names it; and a process that comes to adopt the sandbox while a
// prune holds it waits, then makes a new one, rather than adopting what the
// prune removes.
func TestReusePruneSeesEveryProcess(t *testing.T) {
	img := testimage.Busybox(t)
	api := dockerAPI(t)
	n := randomHex() + randomHex()
	spec := keepAliveSpec(img, n)
	hash := ledger.ReuseIdentity{Image: spec.Image, Env: spec.Env, Command: spec.Cmd}.Hash()
	name := ledger.ReuseName(hash)
	t.Cleanup(func() {
		api.ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	})
	tmp, cacheA, cacheB := t.TempDir(), t.TempDir(), t.TempDir()
	// The command sees this script's keep-alive alone (clitest-docker).
	t.Setenv("RZ", hash[:12])
	t.Setenv(backend.EnvBackend, "clitest-docker")
	t.Setenv("TMPDIR", tmp)
	prune := func() string {
		t.Helper()
		var out, errs bytes.Buffer
		if code := run([]string{"reuse", "prune", "--older-than", "0s", "--cache", cacheB}, &out, &errs); code != 0 {
			t.Fatalf("reuse prune exited %d:\n%s%s", code, out.String(), errs.String())
		}
		return out.String()
	}

	a := keepAliveUser(t, cacheA, tmp, n, img)
	first := a.Expect("id")
	// Cache dir B: no registry entry names it, then one does.
	for _, entry := range []bool{false, true} {
		if entry {
			if err := ledger.WriteReuseEntry(cacheB, hash, ledger.ReuseEntry{Name: name, Image: img, CreatedISO: "2025-12-01T00:00:00Z", Backend: "docker"}); err != nil {
				t.Fatal(err)
			}
		}
		out := prune()
		if !strings.Contains(out, "= "+name+": kept: a test process is using it") {
			t.Errorf("entry in B %v: prune from another cache dir:\n%s\nwant %s kept, in use", entry, out, name)
		}
		if c, err := api.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{}); err != nil || c.Container.ID != first {
			t.Fatalf("entry in B %v: the keep-alive a test process uses is gone (%v)", entry, err)
		}
	}
	a.Finish()

	// A prune holds the use lock (as around its check and its removal)
	// when another process comes to adopt the sandbox.
	d, err := docker.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dir, err := ledger.UseDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	use, err := ledger.KeepAliveUseLock(dir, d.Name(), d.Endpoint(), name)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := use.TryLock(); !ok || err != nil {
		t.Fatalf("take the use lock of %s: %v, %v", name, ok, err)
	}
	defer use.Unlock()
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, use.Path(), unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	b := keepAliveUser(t, cacheB, tmp, n, img, "RZ_TEST_WAIT=1")
	b.Expect("waiting")
	b.Tell("go")
	// It reaches the use lock (opens its file) before it adopts anything.
	fds := []unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}}
	if k, err := unix.Poll(fds, 30*1000); err != nil || k != 1 {
		t.Fatalf("the adopter did not open the use lock %s within 30s (%d, %v): it adopts without it", use.Path(), k, err)
	}
	if _, ok := b.Value("id"); ok {
		t.Fatal("the adopter adopted while a prune held the use lock")
	}
	if _, err := api.ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	use.Remove()
	second := b.Expect("id")
	if second == first {
		t.Errorf("the adopter got %s, the sandbox the prune removed", first)
	}
	if c, err := api.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{}); err != nil || c.Container.ID != second || !c.Container.State.Running {
		t.Errorf("%s is not the running sandbox the adopter made (%v)", name, err)
	}
	b.Finish()
}

// TestReuseRmFIFO: a FIFO at a keep-alive's creation lock
// (reuse/<hash>.lock) does not block `reuse rm`: the sandbox goes, its
// registry entry stays, and the command says why and fails.
func TestReuseRmFIFO(t *testing.T) {
	img := testimage.Busybox(t)
	api := dockerAPI(t)
	rz := randomHex() + randomHex()[:4]
	hash := rz + strings.Repeat("0", 64-len(rz))
	name := ledger.ReuseName(hash)
	t.Setenv("RZ", rz)
	t.Setenv(backend.EnvBackend, "clitest-docker")
	t.Setenv("TMPDIR", t.TempDir())
	if _, err := api.ContainerCreate(context.Background(), client.ContainerCreateOptions{Name: name, Config: &container.Config{
		Image: img, Cmd: []string{"sleep", "3600"}, Labels: map[string]string{testLabel: rz, docker.LabelReuse: rz},
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeLabelled(t, api, testLabel+"="+rz) })
	if _, err := api.ContainerStart(context.Background(), name, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	if err := ledger.WriteReuseEntry(cache, hash, ledger.ReuseEntry{Name: name, Image: img, Backend: "docker"}); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(cache, ledger.ReuseDir, hash+".lock")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Were the command blocked on it, free it.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	go func() {
		var out, errs bytes.Buffer
		code := run([]string{"reuse", "rm", name, "--cache", cache}, &out, &errs)
		done <- result{code, out.String(), errs.String()}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("reuse rm still blocked after 30s: it opened the FIFO %s blocking", fifo)
	}
	want := fifo + " is a named pipe (FIFO), not a regular file"
	if r.code != exitFailure || !strings.Contains(r.out, "! "+name+": removed; registry entry") || !strings.Contains(r.out, want) {
		t.Errorf("reuse rm exited %d:\n%s%s\nwant 1, the sandbox removed, and the entry kept because %s", r.code, r.out, r.errs, want)
	}
	if _, err := api.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("%s is still there", name)
	}
	if _, err := ledger.ReadReuseEntry(cache, hash); err != nil {
		t.Errorf("the registry entry went, its lock a FIFO: %v", err)
	}
}

// TestReuseRmLeavesNoLocks: `reuse rm` deletes, with the sandbox and its
// registry entry, the creation lock (reuse/<hash>.lock) and the host-wide
// use lock (<name>.<hash>.use) the test process that made it left.
func TestReuseRmLeavesNoLocks(t *testing.T) {
	img := testimage.Busybox(t)
	api := dockerAPI(t)
	n := randomHex() + randomHex()
	spec := keepAliveSpec(img, n)
	hash := ledger.ReuseIdentity{Image: spec.Image, Env: spec.Env, Command: spec.Cmd}.Hash()
	name := ledger.ReuseName(hash)
	t.Cleanup(func() {
		api.ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	})
	tmp, cache := t.TempDir(), t.TempDir()
	t.Setenv("RZ", hash[:12])
	t.Setenv(backend.EnvBackend, "clitest-docker")
	t.Setenv("TMPDIR", tmp)
	a := keepAliveUser(t, cache, tmp, n, img)
	a.Expect("id")
	a.Finish()
	useDir, err := ledger.UseDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	locks := func() []string {
		var out []string
		for _, pat := range []string{filepath.Join(cache, ledger.ReuseDir, "*.lock"), filepath.Join(useDir, name+".*.use")} {
			m, _ := filepath.Glob(pat)
			out = append(out, m...)
		}
		return out
	}
	if len(locks()) == 0 {
		t.Fatalf("the keep-alive user left no lock files to test with (%s, %s)", cache, useDir)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"reuse", "rm", name, "--cache", cache}, &out, &errs); code != 0 {
		t.Fatalf("reuse rm exited %d:\n%s%s", code, out.String(), errs.String())
	}
	if l := locks(); len(l) > 0 {
		t.Errorf("after reuse rm, lock files remain: %q\n%s", l, out.String())
	}
}
