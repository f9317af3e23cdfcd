package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Ledger files are written by other processes, in other languages, and may
// hold anything: names are validated by the ledger, but an id is any file
// stem and a reason may quote a record. Nothing read from them reaches the
// terminal raw.

// printable reports whether s can be printed as it is in a table cell: valid
// UTF-8, no control or format character (escape sequences, bidirectional
// overrides), no tab or newline that would break a row.
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || (r != ' ' && !unicode.IsPrint(r)) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// quoteIfNeeded returns s as it is when printable, else Go-quoted.
func quoteIfNeeded(s string) string {
	if s != "" && printable(s) {
		return s
	}
	return strconv.Quote(s)
}

// termSafe escapes, in place, every character of s that is not printable
// (newlines and tabs apart), the way strconv.Quote would: the rest of the
// text stays readable.
func termSafe(s string) string {
	if printable(strings.NewReplacer("\n", "", "\t", "").Replace(s)) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t' || r == ' ' || (r != utf8.RuneError && unicode.IsPrint(r)):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// safeWriter passes text through termSafe. Each Write must hold whole
// lines or whole characters (as fmt and Report.WriteTo do).
type safeWriter struct{ w io.Writer }

func (s safeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, termSafe(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// colourWanted: colour only on a terminal, never with NO_COLOR set to
// anything (https://no-color.org), never on a dumb terminal.
func colourWanted(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && isTerminal(f.Fd())
}

// SGR sequences. Every colour has the same length, so a coloured column of
// a tabwriter table stays aligned: the writer counts the escape bytes as
// width, the same number in every cell.
const (
	sgrReset   = "\x1b[0m"
	sgrRed     = "\x1b[31m"
	sgrGreen   = "\x1b[32m"
	sgrYellow  = "\x1b[33m"
	sgrDefault = "\x1b[39m"
	sgrBold    = "\x1b[01m"
)

// paint wraps s in colour when colour is on.
func (c *cli) paint(sgr, s string) string {
	if !c.colour {
		return s
	}
	return sgr + s + sgrReset
}
