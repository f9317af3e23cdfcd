// Package rightsize is the root of rightsize-go, which makes every sandbox
// a Go test starts go away when the test process dies, however it dies.
// A test calls package sandboxtest (Start, NewNetwork, Track, StartProcess,
// GuardAll, Main and Setup); package reaper sweeps dead runs from code;
// package ledger is the on-disk run ledger shared with the Rust, Kotlin and
// Node members of the family; cmd/rightsize is the command line. The root
// holds no code of its own. The packages:
//
//   - [github.com/rightsize/rightsize-go/sandboxtest]
//   - [github.com/rightsize/rightsize-go/reaper]
//   - [github.com/rightsize/rightsize-go/ledger]
//   - [github.com/rightsize/rightsize-go/backend/kubernetes], imported for
//     its effect where the sandboxes are a cluster's Pods
//   - [github.com/rightsize/rightsize-go/reaper/scripts], the watchdog's
//     scripts, which a program never imports
//
// The examples of this package run with no engine, on the memory backend
// where they need one: how a run's owner is judged, the name of a
// keep-alive sandbox, and a sweep of dead runs.
package rightsize
