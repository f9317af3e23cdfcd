//go:build linux && !rightsize_nokube

package owner_test

// The kubernetes backend, for its effect, as docs/kubernetes.md says. The
// harness builds the owner with -tags rightsize_nokube on every other
// backend: client-go's package init costs each process that starts this
// binary (every owner, and every watchdog, which runs it again) about
// 20 ms of CPU, a third of a memory run's time.
import _ "github.com/rightsize/rightsize-go/backend/kubernetes"
