// Package termtext is the one place where text read from the ledger, from
// an engine or from a user's file is made safe for a terminal, before the
// library or the command line prints it: every control character (C0, DEL,
// C1), every bidirectional or other format character (U+202A–U+202E,
// U+2066–U+2069, U+200E, U+200F, U+061C…), every line or paragraph
// separator and every byte that is not UTF-8 is shown as an escape, the
// way strconv.Quote writes it (\n, \x1b, \u202e); the rest stays readable.
//
// It must never let such a character through: a newline forges a line
// of output, an escape sequence rewrites the terminal, a right-to-left
// override makes a name read as another.
package termtext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable reports whether s can be printed as it is, as one field of a
// line: valid UTF-8 with no character Clean would escape.
func Printable(s string) bool { return printable(s, false) }

// Clean returns s with every character that is not printable escaped: what
// a field of a line goes through (a name, an id, a reason).
func Clean(s string) string { return clean(s, false) }

// CleanText is Clean for text of many lines: newlines and tabs stay.
func CleanText(s string) string { return clean(s, true) }

// Quote returns s as it is when it is printable and not empty, else
// Go-quoted: for a table cell, where an escape alone could be mistaken
// for the text.
func Quote(s string) string {
	if s != "" && Printable(s) {
		return s
	}
	return strconv.Quote(s)
}

func keep(r rune, text bool) bool {
	return r == ' ' || (text && (r == '\n' || r == '\t')) || (r != utf8.RuneError && unicode.IsPrint(r))
}

// printable: a byte that is not UTF-8 ranges as utf8.RuneError, which keep
// refuses.
func printable(s string, text bool) bool {
	for _, r := range s {
		if !keep(r, text) {
			return false
		}
	}
	return true
}

func clean(s string, text bool) string {
	if printable(s, text) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keep(r, text):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// Clip shortens s to about n bytes for a line, on a character's boundary,
// marking the cut with "…". It never cuts inside a rightsize command
// ("rightsize sweep --run 1a2b3c4d", up to the next "(", ")", ";" or ","): a
// command cut short cannot be copied, so the cut moves past its end.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for i := 0; ; {
		j := strings.Index(s[i:], "rightsize ")
		if j < 0 {
			break
		}
		a := i + j
		b := len(s)
		if k := strings.IndexAny(s[a:], "();,"); k >= 0 {
			b = a + k
		}
		if a < n && n < b {
			n = b
			break
		}
		if a >= n {
			break
		}
		i = b
	}
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.TrimRight(s[:n], " ") + "…"
}
