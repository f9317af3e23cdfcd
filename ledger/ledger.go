// Package ledger is the run ledger rightsize-go shares with the Rust,
// Kotlin and Node members of the family: where it lives, what a run's
// record says, how a run is named, and how its owner is judged alive, dead
// or unknown — always as a value with a reason. It is what a program needs
// to read the ledger as the family does; writing it is the library's own
// work (package sandboxtest).
//
// The folder is RIGHTSIZE_CACHE_DIR, else rightsize/ in the user's cache
// folder. Its runs/ folder holds, per run, <run-id>.json (the Record), and
// the line files .sandboxes and .networks listing what the run may have
// live: a name is appended before its sandbox is created and removed only
// once the engine confirmed it gone, so a list is always a superset of
// what lives. A run is reaped only when its owner is judged Dead; a
// sweep's outcomes, and the fates of dead runs, use the Outcome words.
package ledger

import "github.com/rightsize/rightsize-go/internal/ledger"

// EnvCacheDir overrides the cache folder when set to a non-empty value.
const EnvCacheDir = ledger.EnvCacheDir

// Dir is the cache folder: RIGHTSIZE_CACHE_DIR, else rightsize/ in the
// user's cache folder.
func Dir() (string, error) { return ledger.Dir() }

// A Record is a run's record, runs/<run-id>.json: its owner's pid and
// start, its backend, the engine it used.
type Record = ledger.Record

// ParseRecord reads a record as any member of the family writes it; a
// corrupt one is an error that says why, never a panic.
func ParseRecord(data []byte) (Record, error) { return ledger.ParseRecord(data) }

// ValidRunID reports whether id can name a run's files.
func ValidRunID(id string) bool { return ledger.ValidRunID(id) }

// Judge says whether the owner of r is alive, dead, or cannot be judged
// from this process, with the reason. A pid that runs with another start
// than the recorded one is dead; a pid that runs where the start was not
// recorded is alive; a pid in another pid namespace is unknown.
func Judge(r Record) Liveness { return ledger.Judge(r) }

// A Liveness is a judgement of a run's owner, and why.
type Liveness = ledger.Liveness

// A State is alive, dead or unknown. Nothing of an Unknown or Alive run is
// ever removed.
type State = ledger.State

// The states.
const (
	Unknown = ledger.Unknown
	Alive   = ledger.Alive
	Dead    = ledger.Dead
)

// A ReuseIdentity is what names a keep-alive sandbox: its image, command,
// environment, ports, memory limit and files. Every member of the family
// hashes it to the same name (Hash, then ReuseName).
type ReuseIdentity = ledger.ReuseIdentity

// ReuseName is the name of the keep-alive sandbox of identity hash hash:
// rz-reuse- and its first 12 characters.
func ReuseName(hash string) string { return ledger.ReuseName(hash) }

// An Outcome is what became of one sandbox, network, command or local
// process of a dead run.
type Outcome = ledger.Outcome

// The outcomes.
const (
	Removed       = ledger.Removed
	AlreadyGone   = ledger.AlreadyGone
	NotOwned      = ledger.NotOwned
	Kept          = ledger.Kept
	Ended         = ledger.Ended
	Escaped       = ledger.Escaped
	LeftForMember = ledger.LeftForMember
	WouldRemove   = ledger.WouldRemove
	Forgotten     = ledger.Forgotten
)
