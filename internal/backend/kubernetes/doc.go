// Package kubernetes is rightsize-go's Kubernetes backend, on client-go:
// a sandbox is a Pod in one namespace (its files a ConfigMap it mounts), a
// network is the Services that give a run's pods their aliases, and each
// run has a coordination.k8s.io Lease that owns every object of the run
// (ownerReferences). The run's process and its native watchdog renew the
// Lease; the watchdog deletes it when the owner dies, and the cluster's
// own garbage collector deletes the rest.
// A Lease nobody renewed for its duration is a dead run's, wherever its
// owner ran: any sweep deletes it (SweepLapsed).
//
// It is chosen by RIGHTSIZE_BACKEND=kubernetes, in a program that imports
// it (package sandboxtest does not, so that test binaries without
// Kubernetes do not carry client-go). The cluster is the kubeconfig's
// (KUBECONFIG, else ~/.kube/config) or, with neither, the in-cluster
// configuration; the namespace is RIGHTSIZE_KUBE_NAMESPACE, else the
// kubeconfig context's (the pod's own in a cluster). docs/kubernetes.md
// has the least Role a run needs.
//
// The package touches only what carries a run's label and, for Leases,
// the run's name as well: a Lease that is not provably a run's is never
// deleted, however stale.
package kubernetes
