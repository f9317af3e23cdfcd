package names_test

import (
	"testing"

	"github.com/rightsize/rightsize-go/internal/names"
)

// The grammar's cases are ledger's (TestValidName, FuzzValidName test it
// through ledger.ValidName); these say that the rule is one.
func TestValid(t *testing.T) {
	for _, tc := range []struct {
		name   string
		want   bool
		reason string
	}{
		{"rz-1a2b3c4d-1", true, "the family's container name"},
		{"deadbeef", false, "8 hex digits: a short id prefix to Docker"},
		{"0123456789ab", true, "12 hex digits: a short id, as `docker network ls` shows"},
		{"-rf", false, "an option to any command line"},
	} {
		if got := names.Valid(tc.name); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v: %s", tc.name, got, tc.want, tc.reason)
		}
	}
}

func TestCanonicalBackend(t *testing.T) {
	for in, want := range map[string]string{"microsandbox": "msb", "msb": "msb", "docker": "docker", "": "", "Microsandbox": "Microsandbox"} {
		if got := names.CanonicalBackend(in); got != want {
			t.Errorf("CanonicalBackend(%q) = %q, want %q", in, got, want)
		}
	}
}
