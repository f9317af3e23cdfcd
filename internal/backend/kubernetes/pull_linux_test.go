package kubernetes_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/kubetest"
)

// A pod whose image the node cannot pull fails its Create as soon as the
// node says so, with the node's reason, not at the end of the start
// timeout (120 s) as a pod no node ran.
func TestNodeAnImageThatCannotBePulledFailsTheCreate(t *testing.T) {
	t.Parallel()
	kubetest.Node(t)
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-pull-")
	d := open(t, ns, kubernetes.DefaultLeaseSeconds)
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	const run = "0b0e0001"
	defer d.CloseRun(context.Background(), run)
	_, err := d.Create(ctx, "rz-"+run+"-1", backend.Spec{Image: never, RunID: run})
	if !errors.Is(err, kubernetes.ErrPull) || !strings.Contains(err.Error(), never) {
		t.Fatalf("Create of an image no node can pull: %v, want ErrPull naming the image", err)
	}
	if !strings.Contains(err.Error(), "ErrImagePull") && !strings.Contains(err.Error(), "ImagePullBackOff") {
		t.Errorf("the error %q does not say the node's reason", err)
	}
	t.Logf("%v", err)
}
