package names

import "strconv"

// Kind is what a ledger line names: a sandbox, a network, a local
// process, a named volume or an image. It is one type for the ledger
// (which line file), the backends (which engine call) and the reaper
// (what the watchdog is told), so that the three can never disagree on
// how a kind is spelt.
type Kind uint8

// The kinds' values index arrays of every kind ([len(Kinds)]…): a new kind
// comes last, whatever its place in the reaping order.
const (
	SandboxKind Kind = iota
	NetworkKind
	ProcessKind
	// VolumeKind and ImageKind are rightsize-go's own: named volumes and
	// built images a test made through the engine's API, in
	// runs/<id>.volumes and runs/<id>.images, files the other members
	// never read.
	VolumeKind
	ImageKind
)

// Kinds lists every kind in the order a run is reaped: sandboxes first (a
// volume or a network cannot go while a container uses it), then volumes,
// networks, images (an image goes once no container of the run is left on
// it), then processes.
var Kinds = [...]Kind{SandboxKind, VolumeKind, NetworkKind, ImageKind, ProcessKind}

// EngineKinds are the kinds an engine holds, in the order a run is reaped.
var EngineKinds = [...]Kind{SandboxKind, VolumeKind, NetworkKind, ImageKind}

// String is the kind in the singular, for messages: "sandbox".
func (k Kind) String() string {
	switch k {
	case NetworkKind:
		return "network"
	case ProcessKind:
		return "process"
	case VolumeKind:
		return "volume"
	case ImageKind:
		return "image"
	default:
		return "sandbox"
	}
}

// Plural is the kind in the plural, which is also the extension of its line
// file without the dot ("sandboxes" for runs/<id>.sandboxes) and the word
// the watchdog protocol uses (its first letter).
func (k Kind) Plural() string {
	switch k {
	case NetworkKind:
		return "networks"
	case ProcessKind:
		return "processes"
	case VolumeKind:
		return "volumes"
	case ImageKind:
		return "images"
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
