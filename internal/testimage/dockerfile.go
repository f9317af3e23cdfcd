package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/moby/moby/client"
)

// BuildDockerfile builds dockerfile, the context's only file, through
// cli (an engine, or a proxy in front of one), tagged tag and with labels
// added, and returns the image's id. Tests use it for images a test
// "made": what GuardAll's proxy and the reapers must handle.
func BuildDockerfile(ctx context.Context, cli *client.Client, dockerfile, tag string, labels map[string]string) (string, error) {
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile))}); err != nil {
		return "", err
	}
	if _, err := tw.Write([]byte(dockerfile)); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	res, err := cli.ImageBuild(ctx, &ctxTar, client.ImageBuildOptions{Tags: []string{tag}, Labels: labels, Remove: true})
	if err != nil {
		return "", fmt.Errorf("build %s: %w", tag, err)
	}
	// The build's stream ends when the build does; an error in it comes
	// as a message, and the inspect below then finds no image.
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", tag, err)
	}
	in, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", tag, err)
	}
	return in.ID, nil
}
