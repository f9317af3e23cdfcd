// Package rightsize is the root of rightsize-go. It holds no code: see
// sandboxtest for what a test calls (Start, NewNetwork, Track, StartProcess,
// Main, GuardAll), backend for the engines sandboxes run on (backend/docker,
// backend/msb, and backend/memory, which needs no engine), reaper and
// ledger for how a dead run's sandboxes are removed whatever killed it, and
// cmd/rightsize for the command line.
//
// The examples of this package run with no engine, on the memory backend
// where they need one: how a run's owner is judged, the name of a
// keep-alive sandbox, and a sweep of dead runs.
package rightsize
