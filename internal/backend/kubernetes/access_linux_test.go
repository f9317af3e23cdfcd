package kubernetes

import (
	"context"
	"os"
	"testing"

	"github.com/rightsize/rightsize-go/internal/kubetest"
)

// BenchmarkNoNodeRunAccessReview is what a process's first create adds to
// ask the cluster whether it may do what a run needs: a review per verb,
// all at once, from a driver that has asked nothing yet.
func BenchmarkNoNodeRunAccessReview(b *testing.B) {
	cs := kubetest.Client(b)
	ns := kubetest.Namespace(b, cs, "rz-bench-review-")
	env := map[string]string{"KUBECONFIG": os.Getenv(kubetest.EnvKubeconfig), EnvNamespace: ns}
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		d, err := open(ctx, func(k string) string { return env[k] })
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := d.need(ctx, "a benchmark's run", runAccess...); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		d.Close()
		b.StartTimer()
	}
}
