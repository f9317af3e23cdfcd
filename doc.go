// Package rightsize is the root of rightsize-go: see sandboxtest for what a
// test calls (Start, NewNetwork, Track, Main, Shared), backend for the
// engines sandboxes run on, reaper and ledger for how they are removed
// whatever kills the test, and cmd/rightsize for the command line. It holds
// no code of its own; its examples show the entry points side by side.
package rightsize
