// Package podstore_test is a user's test package on the kubernetes
// backend, which it links as docs/kubernetes.md says: for its effect, in
// one _test.go file.
package podstore_test

import (
	"testing"

	_ "github.com/rightsize/rightsize-go/backend/kubernetes"

	"example.com/usermodule/userkit"
)

func TestHolds(t *testing.T) { userkit.Hold(t) }

func TestHoldsAcross(t *testing.T) { userkit.HoldAcross(t) }
