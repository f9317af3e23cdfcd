// Package store_test is a user's test package on the default backend
// (Docker, or Podman through DOCKER_HOST).
package store_test

import (
	"testing"

	"example.com/usermodule/userkit"
)

func TestHolds(t *testing.T) { userkit.Hold(t) }

// TestCheckout is a table's test: its subtest holds what it starts, as
// TestHolds does. The line of its call of Hold is what rightsize says
// made them (Hold is a helper).
func TestCheckout(t *testing.T) {
	t.Run("eu", func(t *testing.T) {
		userkit.Hold(t) // the place of TestCheckout/eu
	})
}
