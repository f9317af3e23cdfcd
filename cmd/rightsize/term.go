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

// printableText is printable, newlines and tabs allowed: the test every
// line of ls's output goes through, so it allocates nothing.
func printableText(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || (r != ' ' && r != '\n' && r != '\t' && !unicode.IsPrint(r)) {
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
	if printableText(s) {
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

// table aligns columns as a tabwriter.Writer(w, 0, 4, 2, ' ', 0) does for
// rows of as many cells (each column as wide as its widest cell, plus two
// spaces; the last cell not padded), holding each row as one string: a
// table of 200,000 runs costs their text, not a structure per cell. Cells
// must hold no tab, but the last one may. Trailing blanks are dropped.
type table struct {
	rows   []string // cells joined by tabs
	widths []int
}

// row adds a row.
func (t *table) row(cells ...string) {
	for i, c := range cells[:len(cells)-1] {
		n := utf8.RuneCountInString(c)
		if i == len(t.widths) {
			t.widths = append(t.widths, n)
		} else if n > t.widths[i] {
			t.widths[i] = n
		}
	}
	t.rows = append(t.rows, strings.Join(cells, "\t"))
}

// len is how many rows the table holds, its header included.
func (t *table) len() int { return len(t.rows) }

// write writes the table to w.
func (t *table) write(w io.Writer) error {
	var b []byte
	for _, r := range t.rows {
		b = b[:0]
		for i := 0; i < len(t.widths); i++ {
			cell, rest, ok := strings.Cut(r, "\t")
			if !ok {
				break
			}
			b = append(b, cell...)
			for pad := t.widths[i] + 2 - utf8.RuneCountInString(cell); pad > 0; pad-- {
				b = append(b, ' ')
			}
			r = rest
		}
		b = append(b, r...)
		for len(b) > 0 && b[len(b)-1] == ' ' {
			b = b[:len(b)-1]
		}
		b = append(b, '\n')
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
