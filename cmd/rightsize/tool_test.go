package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/usermod"
)

// The command line as docs/using.md tells a user to get it, in a module of
// the user's own that already requires rightsize-go (for its tests): `go
// get -tool` records it, with every module it links, and `go tool
// rightsize` runs it. `go run …/cmd/rightsize` from such a module fails on
// the go.sum entries of client-go, which the user's tests never needed.
func TestToolInAUsersModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command line in a module of its own (-short)")
	}
	dir := usermod.Module(t)
	// GOPROXY=off: the module is replaced by this repository, and the
	// proxy here refuses (403) the lookup of its path that a user's proxy
	// answers; what the tool links comes from the module cache.
	get := usermod.Go(dir, "get", "-tool", "github.com/rightsize/rightsize-go/cmd/rightsize")
	get.Env = append(get.Env, "GOPROXY=off")
	if out, err := get.CombinedOutput(); err != nil {
		t.Fatalf("go get -tool github.com/rightsize/rightsize-go/cmd/rightsize: %v\n%s", err, out)
	}
	mod, err := os.ReadFile(dir + "/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "tool github.com/rightsize/rightsize-go/cmd/rightsize") {
		t.Errorf("go.mod after go get -tool has no tool line:\n%s", mod)
	}
	cmd := usermod.Go(dir, "tool", "rightsize", "ls", "--json")
	cmd.Env = append(cmd.Env, "RIGHTSIZE_BACKEND=memory", "RIGHTSIZE_CACHE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !json.Valid(out) {
		t.Fatalf("go tool rightsize ls --json: %v\n%s", err, out)
	}
}
