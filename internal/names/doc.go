// Package names holds the rules the rightsize family agrees on for the
// names its ledger and its backends exchange: which sandbox and network
// names may be written to a line file or put on an engine's command line
// (Valid), and which backend a recorded backend name stands for
// (CanonicalBackend).
//
// Package ledger writes and reads the names, the backends hand them to
// their engines, and neither may import the other (the ledger knows nothing
// of backends, a backend nothing of the ledger): both follow this one
// definition, so that no name the ledger keeps is refused by a backend, and
// nothing a backend refuses can reach an engine through the ledger. It is
// the family's contract (design/ledger-contract.md); a change here is a
// change for the Rust, Kotlin and Node members too.
//
// It imports nothing of the module.
package names
