package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Config is what an archive's image runs and says of itself.
type Config struct {
	Arch       string // GOARCH terms
	Env        []string
	Entrypoint []string
	Cmd        []string
	Labels     map[string]string
}

// Archive is an image named ref, of one layer (rootfs, a Tarball) and cfg,
// in the form `docker save` writes and `ctr images import` and `docker
// load` read: for a runtime that is not an engine this package imports
// into (a Kubernetes node's containerd), with nothing pulled.
func Archive(ref string, rootfs []byte, cfg Config) ([]byte, error) {
	layerSum := sha256.Sum256(rootfs)
	config, err := json.Marshal(map[string]any{
		"architecture": cfg.Arch,
		"os":           "linux",
		"created":      time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339),
		"config":       map[string]any{"Env": cfg.Env, "Entrypoint": cfg.Entrypoint, "Cmd": cfg.Cmd, "Labels": cfg.Labels},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(layerSum[:])}},
	})
	if err != nil {
		return nil, err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(layerSum[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{ref}, "Layers": []string{layerName}}})
	if err != nil {
		return nil, err
	}
	mtime := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, rootfs}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: mtime, Typeflag: tar.TypeReg}); err != nil {
			return nil, fmt.Errorf("archive %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("archive %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
