// Package kubeleasefixture is a test package that e2e's Kubernetes row runs
// with `go test`, never `go test ./...` (testdata is skipped there), as a
// user's would be: it links the kubernetes backend for its effect and runs
// sandboxtest.Main. Its one test holds a pod while e2e deletes the run's
// Lease, then starts another.
package kubeleasefixture
