//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly && !windows

package main

// isTerminal is false where the platform's terminal cannot be detected:
// no colour is the safe answer.
func isTerminal(fd uintptr) bool { return false }
