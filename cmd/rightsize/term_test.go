package main

import (
	"testing"
	"time"
)

func TestTermSafe(t *testing.T) {
	cases := []struct {
		in, want, reason string
	}{
		{"plain text: 42 ms", "plain text: 42 ms", "printable text is left as it is"},
		{"two\nlines\tand a tab", "two\nlines\tand a tab", "newlines and tabs are layout, not escapes"},
		{"a\x1b[2Jb", `a\x1b[2Jb`, "an escape sequence is shown, not obeyed"},
		{"bell\a", `bell\a`, "control characters are escaped the way strconv.Quote does"},
		{"bad\xffutf8", `bad\xffutf8`, "invalid UTF-8 is escaped byte by byte"},
		{"rtl\u202eevil", `rtl\u202eevil`, "a bidirectional override could disguise what follows"},
		{"café ✓", "café ✓", "printable non-ASCII text is kept"},
	}
	for _, c := range cases {
		if got := termSafe(c.in); got != c.want {
			t.Errorf("termSafe(%q) = %q, want %q: %s", c.in, got, c.want, c.reason)
		}
	}
}

func TestQuoteIfNeeded(t *testing.T) {
	cases := []struct {
		in, want, reason string
	}{
		{"rz-1a2b3c4d-1", "rz-1a2b3c4d-1", "a valid name is printed bare"},
		{"", `""`, "an empty cell would shift the columns"},
		{"two words", "two words", "spaces do not break a tabwriter row"},
		{"tab\there", `"tab\there"`, "a tab would start a new column"},
		{"\x1b[31mred", `"\x1b[31mred"`, "an escape sequence is quoted"},
		{"new\nline", `"new\nline"`, "a newline would start a new row"},
	}
	for _, c := range cases {
		if got := quoteIfNeeded(c.in); got != c.want {
			t.Errorf("quoteIfNeeded(%q) = %q, want %q: %s", c.in, got, c.want, c.reason)
		}
	}
}

func TestFormatAge(t *testing.T) {
	cases := []struct {
		age  time.Duration
		want string
	}{
		{0, "0s"},
		{59*time.Second + 999*time.Millisecond, "59s"},
		{5*time.Minute + 7*time.Second, "5m07s"},
		{3*time.Hour + 12*time.Minute + 5*time.Second, "3h12m"},
		{2*24*time.Hour + 4*time.Hour + 59*time.Minute, "2d04h"},
	}
	for _, c := range cases {
		if got := formatAge(lsRun{Modified: "x", age: c.age}); got != c.want {
			t.Errorf("formatAge(%s) = %q, want %q", c.age, got, c.want)
		}
	}
	if got := formatAge(lsRun{}); got != "-" {
		t.Errorf("formatAge with no modification time = %q, want -", got)
	}
}
