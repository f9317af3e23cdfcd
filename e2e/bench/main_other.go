//go:build !linux

// Command bench measures rightsize-go's crash-to-clean time and sweep; it
// runs on Linux only (it kills processes, reads /proc and talks to a local
// Docker engine).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "e2e/bench runs on Linux only")
	os.Exit(1)
}
