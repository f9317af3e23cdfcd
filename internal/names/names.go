package names

import (
	"strings"
)

// MaxLen is the longest sandbox or network name the family accepts.
const MaxLen = 128

// minHex is the shortest hex-only name accepted: Docker's short ids.
const minHex = 12

// Rule says in words what Valid accepts, for messages.
const Rule = "an ASCII letter or digit, then up to 127 letters, digits, '_', '.' or '-'; and, when hex digits only, at least 12 of them"

// Valid reports whether s may be written to, or acted on from, a line file,
// and handed to an engine: an ASCII letter or digit, then up to 127
// letters, digits, '_', '.' or '-'; and, when it is hex digits only, at
// least 12 of them. Nothing a shell or a command line could read as syntax
// or as an option passes; and nothing an engine could take for the short
// prefix of some other container's or network's id (Docker resolves `rm
// 34` to the one container whose id starts with 34). Names the family
// writes all have a '-' in them; a network may be listed by its id (12 or
// 64 hex digits).
func Valid(s string) bool {
	return len(s) <= MaxLen && grammar(s) && !(len(s) < minHex && allHex(s))
}

// grammar is Valid's character rule, `^[A-Za-z0-9][A-Za-z0-9_.-]*$`, read
// byte by byte: as a regular expression with its bound of 127 it cost
// every process that links this package about 1 ms of CPU at start-up (the
// 127 copies compiled), and every watchdog and owner is such a process.
func grammar(s string) bool {
	if s == "" || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// LowerHex reports whether s is one or more lowercase hex digits, as ids,
// hashes and the family's random name parts are written.
func LowerHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// VolumePrefix starts the name of every named volume rightsize-go makes
// for a test (sandboxtest.NewVolume), with 8 lowercase hex digits.
const VolumePrefix = "rz-vol-"

// ImagePrefix starts the name (and tag) of every image rightsize-go builds
// for a test (sandboxtest.NewImage), with 8 lowercase hex digits: the
// ledger line's name and the image's backend.LabelImage mark.
const ImagePrefix = "rz-img-"

// NetworkPrefix starts the name of every network the family makes:
// rz-net-<8 hex>.
const NetworkPrefix = "rz-net-"

// FamilyNetwork reports whether name is a network name as the family
// makes them: NetworkPrefix and 8 lowercase hex digits.
func FamilyNetwork(name string) bool {
	h, ok := strings.CutPrefix(name, NetworkPrefix)
	return ok && len(h) == 8 && LowerHex(h)
}

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// CanonicalBackend returns the backend a recorded backend name stands for:
// "microsandbox" (written by the Rust member of the family) is the same
// backend as "msb"; any other name stands for itself.
func CanonicalBackend(name string) string {
	if name == "microsandbox" {
		return "msb"
	}
	return name
}
