package sandboxtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/ledger"
)

// envReuse enables keep-alive reuse when "true" or "1": a Spec must also
// ask for it with Reuse.
const envReuse = "RIGHTSIZE_REUSE"

// reuseEnabled: exactly "true" or "1", as the rest of the family reads it.
func reuseEnabled() bool {
	v := strings.TrimSpace(os.Getenv(envReuse))
	return v == "1" || v == "true"
}

// reuseIdentity is the identity a keep-alive sandbox of spec is found by,
// hashed as the whole rightsize family hashes it: the key every member
// shares a keep-alive sandbox by.
func reuseIdentity(spec Spec) ledger.ReuseIdentity {
	id := ledger.ReuseIdentity{Image: spec.Image, Env: spec.Env, Command: spec.Cmd, ExposedPorts: spec.Ports, MemoryLimitMB: spec.MemoryLimitMB}
	for _, f := range spec.Files {
		sum := sha256.Sum256(f.Content)
		id.Copies = append(id.Copies, ledger.ReuseCopy{GuestPath: f.GuestPath, SHA256: hex.EncodeToString(sum[:])})
	}
	return id
}

// reuseExtra is rightsize-go's own part of a keep-alive identity: what
// changes the container but not the family's hash (a ReuseKey naming what
// Customize does, the labels, the files' modes). Empty when there is none,
// so that a spec the other members could have made shares their sandbox.
func reuseExtra(spec Spec) string {
	var b strings.Builder
	if spec.ReuseKey != "" {
		fmt.Fprintf(&b, "key=%q\n", spec.ReuseKey)
	}
	keys := make([]string, 0, len(spec.Labels))
	for k := range spec.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "label=%q=%q\n", k, spec.Labels[k])
	}
	for _, f := range spec.Files {
		if m := f.Mode.Perm(); m != 0 && m != 0o644 {
			fmt.Fprintf(&b, "mode=%q=%o\n", f.GuestPath, m)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])[:12]
}

// startReuse adopts the running keep-alive sandbox of this spec's
// identity, or creates it, through the session, which holds the protocol
// with the other processes of the host (reaper.Session.StartKeepAlive).
func (g *Guard) startReuse(ctx context.Context) (string, error) {
	hash := reuseIdentity(g.spec).Hash()
	g.name, g.keepAlive = ledger.ReuseName(hash), true
	bs := g.backendSpec("", "", "")
	bs.Test, bs.TestPlace = g.madeBy()
	ka, err := g.s.StartKeepAlive(ctx, reaper.KeepAliveRequest{
		Hash: hash, Extra: reuseExtra(g.spec), TTL: g.spec.ReuseTTL, Spec: bs,
		Warn: func(w string) { warnf("sandboxtest: %s", w) },
	})
	if err != nil {
		return "", err
	}
	g.setSandbox(ka.Sandbox)
	notes := make([]string, len(ka.Notes))
	for i, n := range ka.Notes {
		notes[i] = "sandboxtest: " + n
	}
	return strings.Join(notes, "\n"), nil
}

// madeBy is the test that creates the keep-alive and the place in its
// code (file:line), for its labels: a keep-alive made later by the same
// test at the same place supersedes it. Nothing when no test is running
// (a suite's Setup, TestMain).
func (g *Guard) madeBy() (test, place string) {
	tb := g.o.testTB()
	if tb == nil {
		return "", ""
	}
	return tb.Name(), g.origin.Place
}
