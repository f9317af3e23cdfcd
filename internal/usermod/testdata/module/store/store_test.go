// Package store_test is a user's test package on the default backend
// (Docker, or Podman through DOCKER_HOST).
package store_test

import (
	"testing"

	"example.com/usermodule/userkit"
)

func TestHolds(t *testing.T) { userkit.Hold(t) }
