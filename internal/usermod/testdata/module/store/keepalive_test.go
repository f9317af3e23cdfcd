package store_test

import (
	"testing"

	"example.com/usermodule/userkit"
)

func TestKeepAlive(t *testing.T) { userkit.KeepAlive(t) }
