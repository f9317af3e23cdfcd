package termtext_test

import (
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/termtext"
)

func TestClean(t *testing.T) {
	cases := []struct {
		in, want, reason string
	}{
		{"plain text: 42 ms", "plain text: 42 ms", "printable text is left as it is"},
		{"two\nlines\tand a tab", `two\nlines\tand a tab`, "in a field, a newline would forge a line of output"},
		{"a\x1b[2Jb", `a\x1b[2Jb`, "an escape sequence is shown, not obeyed"},
		{"bell\a", `bell\a`, "control characters are escaped the way strconv.Quote does"},
		{"del\x7f", `del\x7f`, "DEL is a control character"},
		{"c1\u0085\u009b", `c1\u0085\u009b`, "C1 controls (NEL, CSI) are escaped"},
		{"bad\xffutf8", `bad\xffutf8`, "invalid UTF-8 is escaped byte by byte"},
		{"rtl\u202eevil", `rtl\u202eevil`, "a bidirectional override could disguise what follows"},
		{"\u202a\u202b\u202c\u202d", `\u202a\u202b\u202c\u202d`, "every embedding and override"},
		{"\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`, "every isolate"},
		{"\u200e\u200f\u061c", `\u200e\u200f\u061c`, "the directional marks"},
		{"line\u2028sep", `line\u2028sep`, "a line separator breaks a line on some terminals"},
		{"café ✓", "café ✓", "printable non-ASCII text is kept"},
	}
	for _, c := range cases {
		if got := termtext.Clean(c.in); got != c.want {
			t.Errorf("Clean(%q) = %q, want %q: %s", c.in, got, c.want, c.reason)
		}
		if want := strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(c.want); termtext.CleanText(c.in) != want {
			t.Errorf("CleanText(%q) = %q, want %q: newlines and tabs are its layout, the rest as Clean", c.in, termtext.CleanText(c.in), want)
		}
		if termtext.Printable(c.in) != (c.in == c.want) {
			t.Errorf("Printable(%q) = %v, want %v", c.in, termtext.Printable(c.in), c.in == c.want)
		}
	}
}

func TestQuote(t *testing.T) {
	cases := []struct {
		in, want, reason string
	}{
		{"rz-1a2b3c4d-1", "rz-1a2b3c4d-1", "a valid name is printed bare"},
		{"", `""`, "an empty cell would shift the columns"},
		{"two words", "two words", "spaces do not break a tabwriter row"},
		{"tab\there", `"tab\there"`, "a tab would start a new column"},
		{"\x1b[31mred", `"\x1b[31mred"`, "an escape sequence is quoted"},
		{"new\nline", `"new\nline"`, "a newline would start a new row"},
		{"run\u202e", `"run\u202e"`, "a bidirectional override is quoted"},
	}
	for _, c := range cases {
		if got := termtext.Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %q, want %q: %s", c.in, got, c.want, c.reason)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s      string
		n      int
		want   string
		reason string
	}{
		{"short", 10, "short", "nothing to cut"},
		{"a long note about nothing", 6, "a long…", "cut at n, the space before the mark dropped"},
		{"héllo", 2, "h…", "never inside a character"},
		{"no record; if you know it is dead: rightsize sweep --run 3fe2224a9b; the next sweep retries", 50,
			"no record; if you know it is dead: rightsize sweep --run 3fe2224a9b…", "the command is kept whole, the rest cut"},
		{"rightsize sweep --run 3fe2224a (it forgets them)", 10, "rightsize sweep --run 3fe2224a…", "a command at the start"},
		{"see rightsize ls --fates", 12, "see rightsize ls --fates", "a command that ends the text"},
		{"rightsize ls; then a very long explanation follows here", 20, "rightsize ls; then a…", "a cut after a command"},
	} {
		if got := termtext.Clip(tc.s, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q: %s", tc.s, tc.n, got, tc.want, tc.reason)
		}
	}
}
