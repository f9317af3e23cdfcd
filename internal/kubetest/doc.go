// Package kubetest gives this module's tests the Kubernetes test cluster
// that scripts/kube.sh starts (a real etcd, kube-apiserver and
// kube-controller-manager with its garbage collector, and no node: pods are
// stored and garbage-collected, never scheduled or run). The Kubernetes
// gate of `make test` starts it and names its kubeconfig in
// RIGHTSIZE_TEST_KUBECONFIG.
//
// Config and Client skip a test when that variable is unset, and fail it
// when the variable is set but the cluster cannot be reached: a gate that
// started a cluster must not pass on tests that never ran. Namespace gives
// a test a namespace of its own and deletes it, with all it holds, when the
// test ends.
//
// It is for the tests of github.com/rightsize/rightsize-go only; no package
// the library ships may import it.
package kubetest
