package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/testimage"
)

// EnvNode names the containerd socket of the test cluster's node, where
// one runs (`bash scripts/kube.sh node` prints it; the Kubernetes gate
// sets it).
const EnvNode = "RIGHTSIZE_TEST_KUBE_NODE"

// Node skips t unless the test cluster has a node whose pods run, and
// returns the socket of the node's containerd.
func Node(t testing.TB) string {
	t.Helper()
	Config(t)
	sock := os.Getenv(EnvNode)
	if sock == "" {
		t.Skipf("%s is not set: the test cluster has no node here, and its pods never run (scripts/kube.sh starts one as root on Linux, where containerd, runc and the CNI plugins are or can be installed)", EnvNode)
	}
	return sock
}

var busybox struct {
	once sync.Once
	ref  string
	err  error
}

// Busybox puts testimage's busybox image, built here, on the node (no
// registry: the node's containerd imports it), once per process, and
// returns its reference. It skips t where no node runs.
func Busybox(t testing.TB) string {
	t.Helper()
	ref, err := ImportBusybox(Node(t))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// ImportBusybox is Busybox for a program that is not a test (the chaos
// harness): it puts the image on the node whose containerd listens at
// sock, once per process.
func ImportBusybox(sock string) (string, error) {
	busybox.once.Do(func() {
		ref, archive, err := testimage.BusyboxArchiveBytes()
		if err != nil {
			busybox.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ctr", "-a", sock, "-n", "k8s.io", "images", "import", "-")
		cmd.Stdin = bytes.NewReader(archive)
		if out, err := cmd.CombinedOutput(); err != nil {
			busybox.err = fmt.Errorf("ctr -a %s images import of %s: %v: %s", sock, ref, err, out)
			return
		}
		busybox.ref = ref
	})
	return busybox.ref, busybox.err
}
