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

// RemoveBuilt removes every image carrying label ("key=value"),
// intermediate ones included, children before parents (a parent with
// children cannot go, forced or not): a test's cleanup of its builds.
// Untagged images a build left (Podman keeps a build's steps) carry the
// Dockerfile's labels too, and go with it.
func RemoveBuilt(ctx context.Context, cli *client.Client, label string) {
	for range 20 {
		il, err := cli.ImageList(ctx, client.ImageListOptions{All: true, Filters: client.Filters{}.Add("label", label)})
		if err != nil || len(il.Items) == 0 {
			return
		}
		for _, im := range il.Items {
			cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true})
		}
	}
}
