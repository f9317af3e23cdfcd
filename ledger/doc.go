// Package ledger is the run ledger rightsize-go shares with the Rust,
// Kotlin and Node members of the family: where it lives ([Dir]), what a
// run's record says ([Record], [ParseRecord]), how a run is named
// ([ValidRunID]), how its owner is judged alive, dead or unknown — always
// as a value with a reason ([Judge], [Liveness]) — how a keep-alive sandbox
// is named ([ReuseIdentity], [ReuseName]), and the words for what became of
// what a dead run left ([Outcome]). It is what a program needs to read the
// ledger as the family does; writing it is the library's own work
// (package sandboxtest), and sweeping it package reaper's.
//
// The folder is RIGHTSIZE_CACHE_DIR, else rightsize/ in the user's cache
// folder. Its runs/ folder holds, per run:
//
//   - <run-id>.json, the family's record ([Record]);
//   - <run-id>.sandboxes and <run-id>.networks, the line files listing
//     what the run may have live: a name is appended before its sandbox is
//     created and removed only once the engine confirmed it gone, so a list
//     is always a superset of what lives;
//   - rightsize-go's own files, which the other members never open:
//     <run-id>.gorecord, the record again (alone where the other members
//     would misjudge the run: another engine than the default, another pid
//     namespace), <run-id>.processes, the local processes a test started,
//     <run-id>.volumes and <run-id>.images, the named volumes and the
//     images a test made (removed with the run's sandboxes and networks),
//     and <run-id>.lock, a sweeper's claim;
//   - <run-id>.jsonl, the sandboxes and networks of the family's systemf
//     member, one JSON object a line, instead of the two line files.
//
// Beside runs/ are reuse/ (the keep-alive registry, one entry per
// [ReuseIdentity.Hash]), reaper/ (the watchdogs' scripts and logs),
// fates/ (what became of each dead run, and a mark of each watchdog at
// work) and locks/ (the locks the processes of one user share whatever
// cache folder each was given: an image's build); fates/ and locks/ are
// rightsize-go's own. A run is
// reaped only when its owner is judged [Dead]; nothing of an [Alive] or
// [Unknown] run is ever removed. The package must never call a live process
// dead: when in doubt the answer is Alive or Unknown, with the reason.
package ledger
