//go:build !linux

package docker

// besideEngine cannot be told here; inContainer is false off Linux anyway.
func besideEngine(string) (same, known bool) { return false, false }

// SameMounts cannot tell off Linux.
func SameMounts(string) (same, known bool) { return false, false }
