package ledger_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readFixture reads a fixture: the family's records are package ledger's
// (ledger/testdata), the entries files this package's.
func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	dir := "testdata"
	if strings.HasPrefix(name, "records/") || strings.HasPrefix(name, "bad/") {
		dir = filepath.Join("..", "..", "ledger", "testdata")
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// The fixtures are the contract: if one is re-saved by an editor (a final
// newline added, indentation changed) it no longer tests what it says.
func TestFixturesAreByteExact(t *testing.T) {
	tests := []struct {
		file   string
		want   string
		reason string
	}{
		{"entries/systemf_docker.jsonl", `{"kind":"network","id":"rz-net-0a1b2c3d"}` + "\n" +
			`{"kind":"sandbox","backend":"docker","name":"rz-1a2b3c4d-1","id":"4f1c3a9e2b7d6c5a8e0f1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6"}` + "\n" +
			`{"kind":"sandbox","backend":"docker","name":"rz-1a2b3c4d-2"}` + "\n",
			"the systemf member's entries file: a JSON.stringify'd entry a line, every line ended"},
	}
	for _, tc := range tests {
		if got := string(readFixture(t, tc.file)); got != tc.want {
			t.Errorf("%s changed (%s):\n got %q\nwant %q", tc.file, tc.reason, got, tc.want)
		}
	}
}
