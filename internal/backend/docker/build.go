package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	archive "github.com/moby/go-archive"
	"github.com/moby/moby/client"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// buildTail is how many lines of a build's output a failed build's error
// quotes.
const buildTail = 12

// BuildImage builds b tagged name, and marks it as run runID's under the
// ledger line name: the run's image labels alone (backend.LabelImageRun,
// LabelImage, and LabelImageSince, the engine's time as the build began,
// which the removal of the build's intermediate images goes by), never the
// run's own label, which its containers would inherit. The context is b.Dir
// less what its .dockerignore names. A build the engine fails is an error
// that quotes the last lines of its output. What is built is never pulled:
// a FROM image missing from the engine is pulled by the engine as any
// build's is.
func (d *Driver) BuildImage(ctx context.Context, name, runID string, b backend.Build) (string, error) {
	dockerfile := b.Dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	if fi, err := os.Stat(b.Dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("build image %s: the context %q is not a folder: %v", name, b.Dir, err)
	}
	if _, err := os.Stat(filepath.Join(b.Dir, filepath.FromSlash(dockerfile))); err != nil {
		return "", fmt.Errorf("build image %s: no Dockerfile in the context: %w", name, err)
	}
	var excludes []string
	if f, err := os.Open(filepath.Join(b.Dir, ".dockerignore")); err == nil {
		excludes, err = ignorefile.ReadAll(f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("build image %s: read %s: %w", name, filepath.Join(b.Dir, ".dockerignore"), err)
		}
	}
	tarball, err := archive.TarWithOptions(b.Dir, &archive.TarOptions{ExcludePatterns: excludes})
	if err != nil {
		return "", fmt.Errorf("build image %s: pack the context %s: %w", name, b.Dir, err)
	}
	defer tarball.Close()
	labels := map[string]string{backend.LabelImageRun: runID, backend.LabelImage: name}
	if info, err := d.cli.Info(ctx, client.InfoOptions{}); err == nil && info.Info.SystemTime != "" {
		labels[backend.LabelImageSince] = info.Info.SystemTime
	}
	args := map[string]*string{}
	for k, v := range b.Args {
		args[k] = &v
	}
	res, err := d.cli.ImageBuild(ctx, tarball, client.ImageBuildOptions{
		Tags: []string{name}, Dockerfile: dockerfile, BuildArgs: args, Labels: labels,
		Remove: true, ForceRemove: true,
	})
	if err != nil {
		return "", classify("build image "+name, err)
	}
	defer res.Body.Close()
	if err := buildOutcome(res.Body); err != nil {
		return "", fmt.Errorf("build image %s from %s: %w", name, b.Dir, err)
	}
	in, err := d.cli.ImageInspect(ctx, name)
	if err != nil {
		return "", classify("inspect the image built as "+name, err)
	}
	var l map[string]string
	if in.Config != nil {
		l = in.Config.Labels
	}
	if why := backend.ImageNotOwnedWhy(runID, l); why != "" || l[backend.LabelImage] != name {
		return "", fmt.Errorf("build image %s: %w: the image the engine has under that tag is not the build's (%s)", name, backend.ErrNameTaken, why)
	}
	return name, nil
}

// buildOutcome reads a build's output to its end: nil when the build
// succeeded, or the engine's error with the output's last lines.
func buildOutcome(r io.Reader) error {
	dec := json.NewDecoder(bufio.NewReader(r))
	var tail []string
	for {
		var m struct {
			Stream, Error string
			ErrorDetail   *struct{ Message string } `json:"errorDetail"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading the engine's answer: %w", err)
		}
		for _, line := range strings.Split(strings.TrimRight(m.Stream, "\n"), "\n") {
			if strings.TrimSpace(line) != "" {
				tail = append(tail, line)
			}
		}
		if len(tail) > buildTail {
			tail = tail[len(tail)-buildTail:]
		}
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
			if len(tail) == 0 {
				return errors.New(msg)
			}
			return fmt.Errorf("%s (its last lines: %s)", msg, strings.Join(tail, " | "))
		}
	}
}
