// Package incontainer is a fixture of the crash matrix: a test binary, built
// static, that runs inside a container with the engine's socket mounted,
// as tests do in CI docker executors and devcontainers. It is not a test of
// its own.
package incontainer
