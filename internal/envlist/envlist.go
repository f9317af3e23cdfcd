// Package envlist edits a process environment in its os/exec form, a list
// of KEY=VALUE strings: the one rule for every child process this module
// starts (the watchdog, the demo's owner processes, the tests' helpers).
//
// On Windows environment keys are case-insensitive, and Merge treats them
// so; elsewhere they are compared exactly.
//
// It imports nothing of the module.
package envlist

import (
	"runtime"
	"strings"
)

// Merge returns base with every KEY=VALUE of set applied, in set's order:
// each earlier entry of the same key is dropped, so that no child sees two
// values of one key (which of them wins differs between platforms). base
// is not modified.
func Merge(base []string, set ...string) []string {
	keys := make(map[string]bool, len(set))
	for _, kv := range set {
		keys[key(kv)] = true
	}
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		if !keys[key(kv)] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// Without returns base without the entries whose key drop reports true.
// base is not modified.
func Without(base []string, drop func(key string) bool) []string {
	out := make([]string, 0, len(base))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !drop(k) {
			out = append(out, kv)
		}
	}
	return out
}

func key(kv string) string {
	k, _, _ := strings.Cut(kv, "=")
	if runtime.GOOS == "windows" {
		return strings.ToUpper(k)
	}
	return k
}
