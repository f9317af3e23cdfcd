package main

import (
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/rightsize/rightsize-go/internal/termtext"
)

// Ledger files are written by other processes, in other languages, and may
// hold anything: names are validated by the ledger, but an id is any file
// stem and a reason may quote a record. Nothing read from them reaches the
// terminal raw: each field goes through termtext.Clean or termtext.Quote,
// and the whole output through safeWriter.

// safeWriter passes text through termtext.CleanText: a last guard for
// output whose fields were cleaned one by one. Each Write must hold whole
// lines or whole characters (as fmt and Report.WriteTo do).
type safeWriter struct{ w io.Writer }

func (s safeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, termtext.CleanText(string(p))); err != nil {
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
