package ledger_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

const vectorHash = "799aad5a3338ce3d36999c7ff2733d4673c0592d417563f334544693ec1907a5"

// The registry entry as each member writes it, read back the same; and
// what rightsize-go writes is what they read: the bare guest port as the
// key, the host port a number. Go once wrote "6379/tcp":"32801", which the
// Node member judged corrupt and answered by removing the running
// container.
func TestReuseEntryFamilyFormats(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       ledger.ReuseEntry
	}{
		{"node", `{"name":"rz-reuse-799aad5a3338","image":"redis:7-alpine","ports":{"6379":42137},"createdIso":"2026-11-29T20:36:06.950Z","backend":"docker"}`,
			ledger.ReuseEntry{Name: "rz-reuse-799aad5a3338", Image: "redis:7-alpine", Ports: map[string]int{"6379": 42137}, CreatedISO: "2026-11-29T20:36:06.950Z", Backend: "docker"}},
		{"rust", "{\n  \"name\": \"rz-reuse-799aad5a3338\",\n  \"image\": \"redis:7-alpine\",\n  \"ports\": {\n    \"6379\": 42137\n  },\n  \"udpPorts\": {\"53\": 40000},\n  \"createdIso\": \"2026-11-29T20:30:38Z\",\n  \"backend\": \"microsandbox\"\n}",
			ledger.ReuseEntry{Name: "rz-reuse-799aad5a3338", Image: "redis:7-alpine", Ports: map[string]int{"6379": 42137}, UDPPorts: map[string]int{"53": 40000}, CreatedISO: "2026-11-29T20:30:38Z", Backend: "msb"}},
		{"kotlin", `{"name":"rz-reuse-799aad5a3338","image":"redis:7-alpine","ports":{"6379":42137,"8080":42138},"createdIso":"2026-11-29T20:31:02.123456Z","backend":"msb"}`,
			ledger.ReuseEntry{Name: "rz-reuse-799aad5a3338", Image: "redis:7-alpine", Ports: map[string]int{"6379": 42137, "8080": 42138}, CreatedISO: "2026-11-29T20:31:02.123456Z", Backend: "msb"}},
		{"go before the family's format", `{"name":"rz-reuse-799aad5a3338","image":"redis:7-alpine","ports":{"6379/tcp":"32801","53/udp":"32802"},"createdIso":"2026-11-29T20:30:38.120Z","backend":"docker"}`,
			ledger.ReuseEntry{Name: "rz-reuse-799aad5a3338", Image: "redis:7-alpine", Ports: map[string]int{"6379": 32801}, UDPPorts: map[string]int{"53": 32802}, CreatedISO: "2026-11-29T20:30:38.120Z", Backend: "docker"}},
	} {
		got, err := ledger.ParseReuseEntry([]byte(tc.data))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got.Name != tc.want.Name || got.Image != tc.want.Image || got.CreatedISO != tc.want.CreatedISO || got.Backend != tc.want.Backend ||
			!maps.Equal(got.Ports, tc.want.Ports) || !maps.Equal(got.UDPPorts, tc.want.UDPPorts) {
			t.Errorf("%s: read %+v\nwant %+v", tc.name, got, tc.want)
		}
	}

	cache := t.TempDir()
	e := ledger.ReuseEntry{Name: "rz-reuse-799aad5a3338", Image: "redis:7-alpine", Ports: map[string]int{"6379": 42137}, Backend: "docker", ImageID: "sha256:abc"}
	if err := ledger.WriteReuseEntry(cache, vectorHash, e); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(cache, ledger.ReuseDir, vectorHash+".json"))
	if err != nil {
		t.Fatal(err)
	}
	// The Node member's check, literally: strings for name, image,
	// createdIso, backend; an object whose values are all numbers for ports.
	var node map[string]any
	if err := json.Unmarshal(b, &node); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "image", "createdIso", "backend"} {
		if _, ok := node[k].(string); !ok {
			t.Errorf("written %s: %q is not a string", b, k)
		}
	}
	ports, ok := node["ports"].(map[string]any)
	if !ok {
		t.Fatalf("written %s: ports is not an object", b)
	}
	for k, v := range ports {
		if _, ok := v.(float64); !ok || strings.Contains(k, "/") {
			t.Errorf("written %s: port %q: %v is not the family's bare key and number", b, k, v)
		}
	}
	back, err := ledger.ReadReuseEntry(cache, vectorHash)
	if err != nil || back.ImageID != "sha256:abc" || back.Ports["6379"] != 42137 || back.Writer != "go" {
		t.Errorf("read back %+v, %v", back, err)
	}
	if hs, err := ledger.ReuseHashes(cache); err != nil || len(hs) != 1 || hs[0] != vectorHash {
		t.Errorf("ReuseHashes = %q, %v", hs, err)
	}
	if err := ledger.RemoveReuseEntry(cache, vectorHash); err != nil {
		t.Fatal(err)
	}
	if hs, _ := ledger.ReuseHashes(cache); len(hs) != 0 {
		t.Errorf("after RemoveReuseEntry: %q", hs)
	}
}

func TestReuseEntryRejects(t *testing.T) {
	for _, tc := range []struct{ name, data string }{
		{"not json", `{`},
		{"no ports", `{"name":"a","image":"b","createdIso":"c","backend":"docker"}`},
		{"port not a number", `{"name":"a","image":"b","ports":{"x":1},"createdIso":"c","backend":"docker"}`},
		{"host port out of range", `{"name":"a","image":"b","ports":{"1":70000},"createdIso":"c","backend":"docker"}`},
		{"host port an object", `{"name":"a","image":"b","ports":{"1":{}},"createdIso":"c","backend":"docker"}`},
	} {
		if e, err := ledger.ParseReuseEntry([]byte(tc.data)); err == nil {
			t.Errorf("%s: read as %+v; want an error", tc.name, e)
		}
	}
	if err := ledger.WriteReuseEntry(t.TempDir(), "../../x", ledger.ReuseEntry{}); err == nil {
		t.Error("WriteReuseEntry accepted a hash that names a path")
	}
}
