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

// Merge returns base with every KEY=VALUE of set applied: each key of set
// appears once, with its last value in set, after what remains of base;
// every entry of base with that key is dropped. No child sees two values of
// one key (which of them wins differs between platforms). base and set are
// not modified.
func Merge(base []string, set ...string) []string {
	last := make(map[string]int, len(set))
	for i, kv := range set {
		last[key(kv)] = i
	}
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		if _, ok := last[key(kv)]; !ok {
			out = append(out, kv)
		}
	}
	for i, kv := range set {
		if last[key(kv)] == i {
			out = append(out, kv)
		}
	}
	return out
}

// Without returns base without the entries whose key drop reports true
// (given as written; on Windows, where keys are case-insensitive, drop
// should compare them so). base is not modified.
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
