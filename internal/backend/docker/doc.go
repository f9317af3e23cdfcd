// Package docker is rightsize-go's Docker backend, built on
// testcontainers-go: it creates containers and networks named and labelled
// for the ledger, publishes ports on the loopback address of a local
// engine, stops containers with a short grace period instead of Docker's
// 10 s, removes them by name for the reaper (telling "not found" and "in
// use" from real failures), and says how the watchdog script removes them
// with the docker command line, against the same engine.
//
// The engine is the one testcontainers-go resolves (DOCKER_HOST, the Docker
// context, ~/.testcontainers.properties, the default socket); its endpoint
// is recorded in the ledger, so a run on one engine is never reaped through
// another.
//
// The package decides nothing about what may be removed, and never runs a
// shell: every command it describes for the watchdog is a list of words.
// Works with Ryuk disabled (TESTCONTAINERS_RYUK_DISABLED=true, as air-gapped
// machines need) and does not fight Ryuk when it is enabled: both may remove
// the same container, and whoever comes second finds it gone.
package docker
