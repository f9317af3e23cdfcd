// Command pause is the test node's pod sandbox: the process that holds a
// pod's namespaces while its containers come and go. It waits for SIGTERM
// or SIGINT, and exits 0.
//
//	pause archive FILE NAME
//
// writes an image of itself (a docker-archive tar, as `docker save` makes
// and `ctr images import` reads) named NAME to FILE: one layer holding
// /pause, its entrypoint. The node's runtime imports it, so that nothing is
// pulled.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
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
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		return err
	}
	epoch := time.Unix(0, 0).UTC()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(self)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := lw.Write(self); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config":       map[string]any{"Entrypoint": []string{"/pause"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(layerSum[:])}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(layerSum[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{name}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer.Bytes()}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
