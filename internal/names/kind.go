package names

import "strconv"

// Kind is what a ledger line names: a sandbox, a network or a local
// process. It is one type for the ledger (which line file), the backends
// (which engine call) and the reaper (what the watchdog is told), so that
// the three can never disagree on how a kind is spelt.
type Kind uint8

const (
	SandboxKind Kind = iota
	NetworkKind
	ProcessKind
)

// Kinds lists every kind in the order a run is reaped: sandboxes first (a
// network cannot go while one is attached), then networks, then processes.
var Kinds = [...]Kind{SandboxKind, NetworkKind, ProcessKind}

// String is the kind in the singular, for messages: "sandbox".
func (k Kind) String() string {
	switch k {
	case NetworkKind:
		return "network"
	case ProcessKind:
		return "process"
	default:
		return "sandbox"
	}
}

// Plural is the kind in the plural, which is also the extension of its line
// file without the dot ("sandboxes" for runs/<id>.sandboxes) and the word
// the watchdog protocol uses.
func (k Kind) Plural() string {
	switch k {
	case NetworkKind:
		return "networks"
	case ProcessKind:
		return "processes"
	default:
		return "sandboxes"
	}
}

// Noun is count and kind: "1 sandbox", "3 networks".
func (k Kind) Noun(n int) string {
	if n == 1 {
		return "1 " + k.String()
	}
	return strconv.Itoa(n) + " " + k.Plural()
}
