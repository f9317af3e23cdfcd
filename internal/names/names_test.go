package names_test

import (
	"regexp"
	"strings"
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

// rule is Valid's character rule as the regular expression the family's
// contract writes it; Valid reads it byte by byte.
var rule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func validByRule(s string) bool {
	hexOnly := s != "" && strings.Trim(s, "0123456789abcdefABCDEF") == ""
	return rule.MatchString(s) && !(len(s) < 12 && hexOnly)
}

// TestValidIsTheRule checks Valid against the regular expression on every
// string of up to two bytes, and on the lengths around the bound.
func TestValidIsTheRule(t *testing.T) {
	check := func(s string) {
		if got, want := names.Valid(s), validByRule(s); got != want {
			t.Errorf("Valid(%q) = %v, the rule says %v", s, got, want)
		}
	}
	check("")
	for a := range 256 {
		check(string([]byte{byte(a)}))
		for b := range 256 {
			check(string([]byte{byte(a), byte(b)}))
		}
	}
	for _, n := range []int{11, 12, 127, 128, 129, 200} {
		for _, c := range []string{"a", "0", "_", "-", ".", "z", "/", "\x00"} {
			check("x" + strings.Repeat(c, n-1))
			check(strings.Repeat(c, n))
		}
	}
}

func FuzzValidIsTheRule(f *testing.F) {
	f.Add("rz-1a2b3c4d-1")
	f.Add("0123456789ab")
	f.Add("-rf")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := names.Valid(s), validByRule(s); got != want {
			t.Errorf("Valid(%q) = %v, the rule says %v", s, got, want)
		}
	})
}

func TestCanonicalBackend(t *testing.T) {
	for in, want := range map[string]string{"microsandbox": "msb", "msb": "msb", "docker": "docker", "": "", "Microsandbox": "Microsandbox"} {
		if got := names.CanonicalBackend(in); got != want {
			t.Errorf("CanonicalBackend(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLowerHexAndFamilyNetwork(t *testing.T) {
	for s, want := range map[string]bool{"0a1b": true, "": false, "0A1B": false, "0a1g": false} {
		if got := names.LowerHex(s); got != want {
			t.Errorf("LowerHex(%q) = %v, want %v", s, got, want)
		}
	}
	for s, want := range map[string]bool{"rz-net-0c1d2e3f": true, "rz-net-0c1d2e3": false, "rz-net-0C1D2E3F": false, "rz-net-0c1d2e3f0": false, "my-net": false} {
		if got := names.FamilyNetwork(s); got != want {
			t.Errorf("FamilyNetwork(%q) = %v, want %v", s, got, want)
		}
	}
}
