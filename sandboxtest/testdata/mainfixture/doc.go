// Package mainfixture is a test package run by sandboxtest's suite_test.go,
// never by `go test ./...` (testdata is skipped there). Its TestMain starts
// a network and two sandboxes through sandboxtest.Main, its three parallel
// tests share them (Guard.For), and RZ_FIXTURE_MODE makes it end the ways a
// real suite ends badly.
package mainfixture
