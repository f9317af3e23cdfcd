// Package ledger owns rightsize's on-disk run ledger: the cache directory's
// folders, this process's run (its id, its record and the line files
// listing the sandboxes, networks and local processes it may have live),
// reading every run in the folder whatever member of the family wrote it,
// the keep-alive registry, the fates of dead runs, and the locks. The
// contract's types and rules (the record, the judge, the keep-alive
// identity, the outcome words) are the public package ledger's; this one
// names them for its callers (contract.go).
//
// The files are the contract shared with the Rust, Kotlin and Node members
// of the family (see docs/family.md): records are
// written atomically, a name is appended before its sandbox is created and
// removed only after the backend confirmed it gone, so a line file is always
// a superset of what is live. A run's record is also kept in a file of
// rightsize-go's own, and shown to the other members only where they judge
// the run as Go does (FamilyJudges; the Go-only files are listed in
// files.go).
//
// The package knows nothing of backends or of testing. It must never hand a
// name that fails validation to anyone, never follow a symbolic link out of
// the cache directory, and never call a live process dead: when in doubt the
// answer is Alive or Unknown, with the reason.
package ledger
