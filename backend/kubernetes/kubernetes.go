// Package kubernetes links the kubernetes backend into a program:
// RIGHTSIZE_BACKEND=kubernetes then makes each sandbox a Pod in one
// namespace of the cluster a kubeconfig (KUBECONFIG, else ~/.kube/config)
// or the in-cluster configuration reaches, RIGHTSIZE_KUBE_NAMESPACE else
// the context's. Every object of a run is owned by the run's Lease, which
// its watchdog renews and deletes when the test dies; the cluster's
// garbage collector removes the rest. Import it for its effect, in one
// _test.go file:
//
//	import _ "github.com/rightsize/rightsize-go/backend/kubernetes"
//
// It is apart from package sandboxtest so that test binaries that do not
// use a cluster do not carry client-go. docs/kubernetes.md has the least
// Role a test needs and what is left out.
package kubernetes

import _ "github.com/rightsize/rightsize-go/internal/backend/kubernetes" // registers the backend
