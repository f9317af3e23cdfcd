// Package timeoutfixture is a test package that e2e runs with `go test`,
// never `go test ./...` (testdata is skipped there): its one test starts a
// network and sandboxes, writes what it started to RZ_FIXTURE_INFO, and
// blocks until `go test -timeout` panics (row 2) or a Ctrl-C ends it
// (row 4).
package timeoutfixture
