// Package mainfixture is a test package run by sandboxtest's suite_test.go,
// never by `go test ./...` (testdata is skipped there). Its TestMain starts
// a network and a sandbox through sandboxtest.Main, its three parallel tests
// share them and a lazily started Shared sandbox, and RZ_FIXTURE_MODE makes
// it end the ways a real suite ends badly.
package mainfixture
