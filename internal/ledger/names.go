package ledger

import "github.com/rightsize/rightsize-go/internal/names"

// MaxNameLen is the longest sandbox or network name the ledger accepts.
const MaxNameLen = names.MaxLen

// ValidName reports whether s may be written to, or acted on from, a line
// file: an ASCII letter or digit, then up to 127 letters, digits, '_', '.'
// or '-', and, when hex digits only, at least 12 of them; nothing a command
// line could read as syntax or an option, nothing an engine could take for
// the prefix of another container's id. It is the family's rule, which the
// backends follow too (internal/names).
func ValidName(s string) bool { return names.Valid(s) }

// lineSpace is what a reader trims from both ends of a line. It is exactly
// the set the watchdog script trims (space, \t, \r, \v, \f), so that the two
// readers always agree on which lines are names.
const lineSpace = " \t\r\v\f"

// clipString shortens s for an error message.
func clipString(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
