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
	"time"

	archive "github.com/moby/go-archive"
	"github.com/moby/moby/client"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/names"
)

// buildTail is how many lines of a build's output a failed build's error
// quotes.
const buildTail = 12

// BuildImage builds b tagged name, and marks it as run runID's under the
// ledger line name: the run's image labels alone (backend.LabelImageRun,
// LabelImage, and LabelImageSince, the engine's time as the build began,
// which the removal of the build's intermediate images goes by), never the
// run's own label, which its containers would inherit. The context is b.Dir
// less what its .dockerignore names (never the Dockerfile, nor the
// .dockerignore itself, as the docker command sends them). It is built
// without the engine's cache: every layer is then this build's own, made
// since it began, and goes with its image; a layer another run's build
// shared would stay when both images went. The images of steps that lead
// nowhere once the build ends (a failed build's, an earlier stage's) are
// removed at its end. A build the engine fails is an error that quotes the
// last lines of its output. A FROM image missing from the engine is
// pulled by the engine, as any build's is.
func (d *Driver) BuildImage(ctx context.Context, name, runID string, b backend.Build) (string, error) {
	dockerfile, err := contextPath(b.Dir, b.Dockerfile)
	if err != nil {
		return "", fmt.Errorf("build image %s: %w", name, err)
	}
	excludes := []string{}
	if f, err := os.Open(filepath.Join(b.Dir, ".dockerignore")); err == nil {
		excludes, err = ignorefile.ReadAll(f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("build image %s: read %s: %w", name, filepath.Join(b.Dir, ".dockerignore"), err)
		}
	}
	excludes = append(excludes, "!"+dockerfile, "!.dockerignore")
	tarball, err := archive.TarWithOptions(b.Dir, &archive.TarOptions{ExcludePatterns: excludes})
	if err != nil {
		return "", fmt.Errorf("build image %s: pack the context %s: %w", name, b.Dir, err)
	}
	defer tarball.Close()
	labels := map[string]string{backend.LabelImageRun: runID, backend.LabelImage: name}
	since := engineTime(ctx, d.cli)
	if since != "" {
		labels[backend.LabelImageSince] = since
	}
	args := map[string]*string{}
	for k, v := range b.Args {
		args[k] = &v
	}
	res, err := d.cli.ImageBuild(ctx, tarball, client.ImageBuildOptions{
		Tags: []string{name}, Dockerfile: dockerfile, BuildArgs: args, Labels: labels,
		NoCache: true, Remove: true, ForceRemove: true,
	})
	if err != nil {
		return "", classify("build image "+name, err)
	}
	steps, berr := buildOutcome(res.Body)
	res.Body.Close()
	in, ierr := d.cli.ImageInspect(ctx, name)
	d.removeSteps(context.WithoutCancel(ctx), steps, since, in.ID, berr == nil && ierr == nil)
	if berr != nil {
		return "", fmt.Errorf("build image %s from %s: %w", name, b.Dir, berr)
	}
	if ierr != nil {
		return "", classify("inspect the image built as "+name, ierr)
	}
	var l map[string]string
	if in.Config != nil {
		l = in.Config.Labels
	}
	if why := backend.ImageNotOwnedWhy(runID, l); why != "" {
		return "", fmt.Errorf("build image %s: %w: the image the engine has under that tag is not the build's (%s)", name, backend.ErrNameTaken, why)
	}
	if l[backend.LabelImage] != name {
		return "", fmt.Errorf("build image %s: %w: the image the engine has under that tag is marked %q", name, backend.ErrNameTaken, l[backend.LabelImage])
	}
	return name, nil
}

var _ backend.ImageBuilder = (*Driver)(nil)

// contextPath is the Dockerfile's path in the context dir, slashed, as the
// engine takes it: "Dockerfile" when df is empty; an absolute df must lie
// in dir. A Dockerfile outside dir, or missing, is an error.
func contextPath(dir, df string) (string, error) {
	if fi, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("the context: %w", err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("the context %s is not a folder", dir)
	}
	if df == "" {
		df = "Dockerfile"
	}
	if filepath.IsAbs(df) {
		rel, err := filepath.Rel(dir, df)
		if err != nil {
			return "", fmt.Errorf("the Dockerfile %s: %w", df, err)
		}
		df = rel
	}
	df = filepath.Clean(df)
	if df == ".." || strings.HasPrefix(df, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("the Dockerfile %s is outside the context %s", df, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, df)); err != nil {
		return "", fmt.Errorf("no Dockerfile in the context: %w", err)
	}
	return filepath.ToSlash(df), nil
}

// engineTime is the engine's clock now, as it stamps images; "" when it
// does not say within checkTimeout.
func engineTime(ctx context.Context, cli *client.Client) string {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return ""
	}
	return info.Info.SystemTime
}

// removeSteps removes, latest first, the images of a build's steps that
// its image does not lead to (all of them when !built): a failed build's
// steps, an earlier stage's. Only untagged images made since the build
// began (by the engine's clock), never an image it was FROM; never
// forced: one in use, or with a child, stays. The build ran without the
// cache, so each is its own. Without since, none is removed.
func (d *Driver) removeSteps(ctx context.Context, steps []string, since, image string, built bool) {
	began, err := time.Parse(time.RFC3339Nano, since)
	if err != nil {
		return
	}
	keep := map[string]bool{}
	for id := imageID(image); built && id != ""; {
		keep[id] = true
		n, err := d.imageNode(ctx, id)
		if err != nil {
			break
		}
		id = imageID(n.Parent)
	}
	for i := len(steps) - 1; i >= 0; i-- {
		ctx, cancel := context.WithTimeout(ctx, checkTimeout)
		n, err := d.imageNode(ctx, steps[i])
		created, cerr := time.Parse(time.RFC3339Nano, n.Created)
		if err == nil && cerr == nil && !created.Before(began) && !keep[imageID(n.ID)] && len(n.RepoTags) == 0 && d.imageUnused(ctx, n.ID) == nil {
			_, _ = d.cli.ImageRemove(ctx, "sha256:"+imageID(n.ID), client.ImageRemoveOptions{})
		}
		cancel()
	}
}

// buildOutcome reads a build's output to its end: the ids of the images
// its steps made, in order, and nil when the build succeeded, or the
// engine's error with the output's last lines.
func buildOutcome(r io.Reader) (steps []string, err error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	var tail []string
	for {
		var m struct {
			Stream, Error string
			ErrorDetail   *struct{ Message string } `json:"errorDetail"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return steps, nil
		} else if err != nil {
			return steps, fmt.Errorf("reading the engine's answer: %w", err)
		}
		for _, line := range strings.Split(strings.TrimRight(m.Stream, "\n"), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			tail = append(tail, line)
			// Docker's classic builder says " ---> <12 hex>" after each
			// step, Podman "--> <hex>".
			if id, ok := strings.CutPrefix(strings.TrimLeft(strings.TrimSpace(line), "-"), "> "); ok && len(id) >= 12 && names.LowerHex(id) {
				steps = append(steps, id)
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
				return steps, errors.New(msg)
			}
			return steps, fmt.Errorf("%s (its last lines: %s)", msg, strings.Join(tail, " | "))
		}
	}
}
