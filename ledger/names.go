package ledger

import "regexp"

// MaxNameLen is the longest sandbox or network name the ledger accepts.
const MaxNameLen = 128

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ValidName reports whether s may be written to, or acted on from, a line
// file: an ASCII letter or digit, then up to 127 letters, digits, '_', '.'
// or '-'. Nothing a shell or a command line could read as syntax or as an
// option passes.
func ValidName(s string) bool {
	return len(s) <= MaxNameLen && namePattern.MatchString(s)
}

// lineSpace is what a reader trims from both ends of a line. It is exactly
// the set the watchdog script trims (space, \t, \r, \v, \f), so that the two
// readers always agree on which lines are names.
const lineSpace = " \t\r\v\f"
