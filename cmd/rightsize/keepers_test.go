package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/backend/memory"
	"github.com/rightsize/rightsize-go/internal/keeper"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// ls --keepers lists the engine's keepers, in a table and as JSON: a
// running keeper of a run, with its lease timeout; once it is removed, it
// is not listed. A backend that makes none says so, and exits 0.
func TestLsKeepers(t *testing.T) {
	testimage.Engine(t)
	t.Setenv(backend.EnvBackend, backend.Docker)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := docker.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	run := hex.EncodeToString(b)
	k, err := keeper.Start(ctx, d.Client(), run, keeper.Options{LeaseTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Remove(context.Background()) })

	code, out, errs := rightsize(t, "ls", "--keepers", "--json")
	var rep keepersReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.EngineError != "" {
		t.Fatalf("ls --keepers --json exited %d: %s%s", code, out, errs)
	}
	found := false
	for _, r := range rep.Keepers {
		if r.Run == run {
			found = true
			if r.Name != keeper.NamePrefix+run || r.ID != k.ID || r.State != "running" || r.LeaseSeconds != 30 || r.CreatedISO == "" {
				t.Errorf("the keeper of run %s listed as %+v", run, r)
			}
		}
	}
	if !found || rep.Backend != backend.Docker || rep.Endpoint != d.Endpoint() {
		t.Errorf("ls --keepers --json: %s, want the keeper of run %s on %s", out, run, d.Endpoint())
	}
	code, out, errs = rightsize(t, "ls", "--keepers")
	if code != 0 || !strings.Contains(out, "keepers (") || !strings.Contains(out, keeper.NamePrefix+run) || !strings.Contains(out, "30s") {
		t.Errorf("ls --keepers exited %d:\n%s%s", code, out, errs)
	}

	if err := k.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, _ = rightsize(t, "ls", "--keepers")
	if code != 0 || strings.Contains(out, keeper.NamePrefix+run) {
		t.Errorf("after its removal, ls --keepers exited %d and still lists it:\n%s", code, out)
	}

	t.Setenv(backend.EnvBackend, backend.Memory)
	t.Setenv(memory.EnvDir, t.TempDir())
	code, out, errs = rightsize(t, "ls", "--keepers")
	if code != 0 || !strings.HasPrefix(out, "keepers not listed: the memory backend makes no engine-side keepers") {
		t.Errorf("ls --keepers on the memory backend exited %d:\n%s%s", code, out, errs)
	}
}
