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

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/ledger"
)

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
