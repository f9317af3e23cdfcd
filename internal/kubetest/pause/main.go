// Command pause is the test node's pod sandbox (scripts/kube.sh): the
// process that holds a pod's namespaces while its containers come and go.
// It waits for SIGTERM or SIGINT, and exits 0.
//
//	pause archive FILE NAME
//
// writes an image of itself named NAME to FILE (image.Archive: one layer
// holding /pause, its entrypoint), which the node's containerd imports, so
// that nothing is pulled.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/rightsize/rightsize-go/internal/image"
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "archive" {
		if err := archive(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "pause archive:", err)
			os.Exit(1)
		}
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}

func archive(file, name string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	content, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	rootfs, err := image.Tarball([]image.Entry{{Name: "pause", Mode: 0o755, Content: content}})
	if err != nil {
		return err
	}
	a, err := image.Archive(name, rootfs, image.Config{Arch: runtime.GOARCH, Entrypoint: []string{"/pause"}})
	if err != nil {
		return err
	}
	return os.WriteFile(file, a, 0o600)
}
