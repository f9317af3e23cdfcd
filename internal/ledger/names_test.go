package ledger_test

import (
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

func TestValidName(t *testing.T) {
	tests := []struct {
		name   string
		want   bool
		reason string
	}{
		{"rz-1a2b3c4d-1", true, "the family's container name"},
		{"rz-net-0badcafe", true, "the family's network name"},
		{"rz-reuse-799aad5a3338", true, "a keep-alive container name"},
		{"z", true, "one letter that is not a hex digit is a name"},
		{"0rz", true, "a leading digit is fine"},
		{"a", false, "hex digits only, fewer than 12: docker would take it for an id prefix and remove another container"},
		{"0", false, "hex digits only, fewer than 12"},
		{"DEADbeef0", false, "hex digits in either case, fewer than 12"},
		{"0123456789a", false, "11 hex digits: still shorter than a short id"},
		{"0123456789ab", true, "12 hex digits: a short id, as `docker network ls` shows"},
		{"A.b_c-9", true, "letters, digits, '.', '_' and '-' after the first character"},
		{"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", true, "a full docker network id (64 hex)"},
		{strings.Repeat("a", 128), true, "128 characters is the limit, inclusive"},
		{strings.Repeat("a", 129), false, "129 characters is one too many"},
		{"", false, "an empty line is not a name"},
		{"-rf", false, "a leading '-' would be read as an option by docker or msb"},
		{".hidden", false, "a leading '.' could name '.' or '..'"},
		{"_x", false, "a leading '_' is not allowed by the pattern"},
		{"..", false, "a path component, not a name"},
		{"rz-é", false, "non-ASCII letters are not in the set"},
		{"rz\u00a0x", false, "a no-break space is not a name character"},
		{"rz x", false, "an inner space would split into two arguments in a careless shell"},
		{"$(x)", false, "command substitution"},
		{"a$(x)", false, "command substitution after a valid first character"},
		{"a`x`", false, "backtick command substitution"},
		{"a;b", false, "a command separator"},
		{"a|b", false, "a pipe"},
		{"a/b", false, "a path separator"},
		{"a\nb", false, "a newline would make two lines of one name"},
		{"a\n", false, "a trailing newline is not part of a name (regexp $ must not match before it)"},
		{"a\x00b", false, "a NUL byte truncates C strings"},
		{"a\x00", false, "a trailing NUL byte"},
		{"a\t", false, "a tab (trimming is the reader's job, not ValidName's)"},
		{"a*", false, "a glob"},
		{"a=b", false, "'=' is not in the set"},
		{"\xff", false, "invalid UTF-8"},
	}
	for _, tc := range tests {
		if got := ledger.ValidName(tc.name); got != tc.want {
			t.Errorf("ValidName(%q) = %v, want %v: %s", tc.name, got, tc.want, tc.reason)
		}
	}
}

// refValidName is written independently of the package (no regexp): a byte
// loop over the contract's [A-Za-z0-9][A-Za-z0-9_.-]{0,127}, less the
// strings of fewer than 12 hex digits only.
func refValidName(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	if len(s) < 12 && strings.Trim(s, "0123456789abcdefABCDEF") == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum {
			continue
		}
		if i > 0 && (c == '_' || c == '.' || c == '-') {
			continue
		}
		return false
	}
	return true
}

func FuzzValidName(f *testing.F) {
	for _, s := range []string{"", "a", "rz-1a2b3c4d-1", "-a", ".a", "_a", "a\n", "a\x00", "$(x)", "a`b`", "a;b",
		strings.Repeat("a", 128), strings.Repeat("a", 129), "é", "a\u00a0", "A.b_c-9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ledger.ValidName(s), refValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v, reference says %v", s, got, want)
		}
	})
}
