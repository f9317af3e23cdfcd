package ledger_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/ledger"
)

// The keep-alive identity hashes to the family's bytes. Each vector is a
// sibling's own test case, its canonical JSON and hash computed by
// JSON.stringify and sha256 in Node (as rightsize-node's
// src/core/reuse/hash.ts at 0b3b667 builds it), not by Go. Where the
// members disagree, Go follows the majority.
func TestReuseIdentityFamilyVectors(t *testing.T) {
	base := ledger.ReuseIdentity{Image: "redis:7-alpine", Env: map[string]string{"A": "1", "B": "2"}, ExposedPorts: []string{"6379/tcp"}}
	with := func(f func(*ledger.ReuseIdentity)) ledger.ReuseIdentity { id := base; f(&id); return id }
	for _, tc := range []struct {
		name      string
		id        ledger.ReuseIdentity
		canonical string
		hash      string
		source    string
	}{
		{"pinned vector", base,
			`{"image":"redis:7-alpine","env":{"A":"1","B":"2"},"command":[],"exposedPorts":[6379],"memoryLimitMb":null,"copies":[]}`,
			"799aad5a3338ce3d36999c7ff2733d4673c0592d417563f334544693ec1907a5",
			"all three: Node test hash.test.ts (0b3b667), Kotlin ReuseIdentityTest.kt (db2958f), Rust reuse.rs pinned_cross_language_vector_hashes_to_the_pinned_value (54732f96)"},
		{"a udp port", with(func(id *ledger.ReuseIdentity) { id.ExposedPorts = []string{"6379/tcp", "53/udp"} }),
			`{"image":"redis:7-alpine","env":{"A":"1","B":"2"},"command":[],"exposedPorts":[6379],"memoryLimitMb":null,"copies":[],"exposedUdpPorts":[53]}`,
			"10e25824defb5b87817425682e1472c32a9f16eea0b4cf3fb4d89d7659228177",
			"Rust reuse.rs (54732f96) a_udp_exposed_port_changes_the_hash_and_never_collides_with_a_tcp_only_spec: tcp [6379], udp [53]; canonical_json appends exposedUdpPorts last, only when non-empty. " +
				"Node the same: hash.ts canonicalize (the version with exposedUdpPorts, its withExposedUdpPorts) spreads exposedUdpPorts, sorted, after networkDisabled, only when non-empty: these bytes and this hash from node 20's JSON.stringify and sha256"},
		{"udp ports only, out of order", ledger.ReuseIdentity{Image: "redis:7-alpine", ExposedPorts: []string{"5353/udp", "53/UDP"}},
			`{"image":"redis:7-alpine","env":{},"command":[],"exposedPorts":[],"memoryLimitMb":null,"copies":[],"exposedUdpPorts":[53,5353]}`,
			"016eeb95c182d70bc7205f53d59070bdb608333598815d16f9436d4ad96b30ab",
			"Rust reuse.rs (54732f96) udp_port_order_at_the_call_site_does_not_affect_the_hash: udp [53, 5353] either way; Node's hash.ts sorts them numerically the same (node 20 gives these bytes for exposedUdpPorts [5353, 53])"},
		{"one port on both protocols", with(func(id *ledger.ReuseIdentity) { id.ExposedPorts = []string{"53/udp", "53/tcp"} }),
			`{"image":"redis:7-alpine","env":{"A":"1","B":"2"},"command":[],"exposedPorts":[53],"memoryLimitMb":null,"copies":[],"exposedUdpPorts":[53]}`,
			"3d3af9ec68356691bb1094326223cd88223848665ddfa23369feeb575e80ddfb",
			"Node's hash.ts: protocol is part of identity, DNS's 53 on both is neither 53/tcp nor 53/udp alone (node 20 gives these bytes); Kotlin 0.7.11 hashes udp ports too (CHANGELOG: ReuseIdentitySpec gains exposedUdpPorts, omitted when empty), but its source is not readable here, so no Kotlin vector is pinned"},
		{"escapes", with(func(id *ledger.ReuseIdentity) {
			id.Env = map[string]string{"MSG": "line1\nline2\ttab\"quote\\back\rcr"}
		}),
			`{"image":"redis:7-alpine","env":{"MSG":"line1\nline2\ttab\"quote\\back\rcr"},"command":[],"exposedPorts":[6379],"memoryLimitMb":null,"copies":[]}`,
			"f6e01199247b567fcc13d2740187d6303f392c15b6c700f3c7b24635369fe161",
			"Kotlin ReuseIdentityTest.kt (db2958f) canonical JSON escapes quotes, backslashes, whitespace controls: all three agree"},
		{"a raw control byte", with(func(id *ledger.ReuseIdentity) { id.Image = "redis\x01alpine" }),
			`{"image":"redis\u0001alpine","env":{"A":"1","B":"2"},"command":[],"exposedPorts":[6379],"memoryLimitMb":null,"copies":[]}`,
			"58a85299f11265d5f0483821afaddf92b40baf3ada2e03428be8b07a60765d0d",
			"Kotlin ReuseIdentityTest.kt (db2958f): 0x01 is \\u0001, lowercase, in all three"},
		{"where they disagree", with(func(id *ledger.ReuseIdentity) { id.Env = map[string]string{"X": "\b\f\u2028\u2029<>&\x7f\x1f"} }),
			"{\"image\":\"redis:7-alpine\",\"env\":{\"X\":\"\\b\\f\u2028\u2029<>&\x7f\\u001f\"},\"command\":[],\"exposedPorts\":[6379],\"memoryLimitMb\":null,\"copies\":[]}",
			"741fbea95d7cd6066d483bdcddf0f9f5df072ef9c039069984c5b367de5e0a18",
			"the majority, Node (JSON.stringify) and Rust (serde_json::to_string, reuse.rs json_string): \\b and \\f by name, U+2028 and U+2029 raw; Kotlin's jsonString writes \\u0008 and \\u000c"},
		{"keys past U+FFFF", with(func(id *ledger.ReuseIdentity) {
			id.Env = map[string]string{"\uE000": "bmp", "\U0001F600": "astral", "a": "ascii"}
		}),
			"{\"image\":\"redis:7-alpine\",\"env\":{\"a\":\"ascii\",\"\U0001F600\":\"astral\",\"\uE000\":\"bmp\"},\"command\":[],\"exposedPorts\":[6379],\"memoryLimitMb\":null,\"copies\":[]}",
			"540c83edbeb148d0a311a4898348ce0cf502c1e62dc3ab61a3856f7096f5e287",
			"the majority, Node (hash.ts compareStrings, <) and Kotlin (toSortedMap): UTF-16 order puts U+1F600 (D83D DE00) before U+E000; Rust's BTreeMap order is by bytes"},
	} {
		if got := string(tc.id.CanonicalJSON()); got != tc.canonical {
			t.Errorf("%s: canonical JSON\n got %s\nwant %s\n(%s)", tc.name, got, tc.canonical, tc.source)
		}
		if got := tc.id.Hash(); got != tc.hash {
			t.Errorf("%s: hash %s, want %s (%s)", tc.name, got, tc.hash, tc.source)
		}
	}
	// Copies are sorted by guestPath in the same order as env keys.
	cp := with(func(id *ledger.ReuseIdentity) {
		id.Copies = []ledger.ReuseCopy{{GuestPath: "/\uE000", SHA256: "b"}, {GuestPath: "/\U0001F600", SHA256: "a"}}
	})
	if got, want := string(cp.CanonicalJSON()), "\"copies\":[{\"guestPath\":\"/\U0001F600\",\"sha256\":\"a\"},{\"guestPath\":\"/\uE000\",\"sha256\":\"b\"}]"; !strings.Contains(got, want) {
		t.Errorf("copies in UTF-16 order: got %s, want it to hold %s", got, want)
	}
}

// docs/family.md says who hashes udp ports as the vectors above pin them:
// Rust and Node (hash.ts canonicalize appends exposedUdpPorts, sorted,
// only when there are any), and Kotlin since 0.7.11 by its changelog.
func TestFamilyDocUDPIdentity(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "family.md"))
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| Keep-alive identity") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/family.md has no keep-alive identity row")
	}
	for _, want := range []string{"Rust and Node hash udp ports", "Kotlin 0.7.11 hashes them too", "Go hashes udp ports as Rust and Node do"} {
		if !strings.Contains(row, want) {
			t.Errorf("docs/family.md's keep-alive identity row does not say %q:\n%s", want, row)
		}
	}
	if strings.Contains(row, "have none") {
		t.Errorf("docs/family.md's keep-alive identity row still says a member hashes no udp ports:\n%s", row)
	}
}
