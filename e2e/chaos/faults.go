//go:build linux

package main

import "context"

// faults is the fault proxy in front of an engine's socket.
type faults struct{}

func (f *faults) run(context.Context, *harness) {}
func (f *faults) stop()                         {}
