package main

import (
	"context"
	"os"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// lsEngineTimeout bounds what ls asks the engine (resolving it and listing
// its keep-alive sandboxes): ls must answer without one.
const lsEngineTimeout = 5 * time.Second

// openEngine opens the backend a test process would use (RIGHTSIZE_BACKEND,
// else Docker) within ctx.
//
// The command creates nothing through testcontainers-go, so it never needs
// Ryuk: unless the user set TESTCONTAINERS_RYUK_DISABLED, it is turned off
// for this process first. Otherwise the Docker backend looks for Ryuk's
// image at its opening and, where the image is missing, tries to pull it,
// which without a registry could spend all of ls's few seconds.
func openEngine(ctx context.Context) (backend.Driver, error) {
	if _, ok := os.LookupEnv(envRyukDisabled); !ok {
		os.Setenv(envRyukDisabled, "true")
	}
	return backend.Resolve(ctx)
}
