package kubernetes_test

import (
	"context"
	"strings"
	"testing"

	_ "github.com/rightsize/rightsize-go/backend/kubernetes"
	"github.com/rightsize/rightsize-go/reaper"
)

// Importing the package links the backend: a sweep that asks for it gets
// it, and fails on the missing kubeconfig, not on a backend that is not
// linked.
func TestLinked(t *testing.T) {
	t.Setenv("RIGHTSIZE_BACKEND", "kubernetes")
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := reaper.Sweep(context.Background(), reaper.WithCacheDir(t.TempDir()))
	if err == nil || strings.Contains(err.Error(), "not linked") {
		t.Fatalf("sweep on an unconfigured cluster: %v; want an error of the configuration", err)
	}
	t.Log(err)
}
