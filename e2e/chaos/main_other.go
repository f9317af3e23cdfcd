//go:build !linux

// Command chaos runs owners of sandboxes to thousands of random deaths and
// checks the reaper's invariants; it runs on Linux only (it signals
// processes through pidfds and reads /proc).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "e2e/chaos runs on Linux only")
	os.Exit(1)
}
