//go:build !rightsize_nokube

package main

// The kubernetes backend, for RIGHTSIZE_BACKEND=kubernetes and --backend
// kubernetes. `make demo` builds the command line without it (-tags
// rightsize_nokube): client-go is most of its compile, and the demo runs
// on Docker.
import _ "github.com/rightsize/rightsize-go/backend/kubernetes"
