package ledger

import "regexp"

// MaxNameLen is the longest sandbox or network name the ledger accepts.
const MaxNameLen = 128

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ValidName reports whether s may be written to, or acted on from, a line
// file: an ASCII letter or digit, then up to 127 letters, digits, '_', '.'
// or '-'; and, when it is hex digits only, at least 12 of them. Nothing a
// shell or a command line could read as syntax or as an option passes; and
// nothing an engine could take for the short prefix of some other
// container's or network's id (Docker resolves `rm 34` to the one container
// whose id starts with 34). Names the family writes all have a '-' in them;
// a network may be listed by its id (12 or 64 hex digits).
func ValidName(s string) bool {
	return len(s) <= MaxNameLen && namePattern.MatchString(s) && !(len(s) < minHexName && allHex(s))
}

// minHexName is the shortest hex-only name accepted: Docker's short ids.
const minHexName = 12

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// lineSpace is what a reader trims from both ends of a line. It is exactly
// the set the watchdog script trims (space, \t, \r, \v, \f), so that the two
// readers always agree on which lines are names.
const lineSpace = " \t\r\v\f"
