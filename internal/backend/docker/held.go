package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/names"
)

// Kinds: Docker (and Podman through its API) removes named volumes and
// images too (backend.KindsRemover).
func (d *Driver) Kinds() []backend.Kind { return names.EngineKinds[:] }

// held: a volume or image removal refused because something still uses
// it. Neither is ever forced: a volume a container mounts, an image a
// container (any run's, a keep-alive) runs from, one with child images or
// more tags than the run's, stays. Docker answers 409 ("volume is in use",
// "image is being used by running container", "image has dependent child
// images", "image is referenced in multiple repositories"); Podman 409 or
// 500 ("volume is being used", "image is in use by a container").
var held = answer{cerrdefs.IsConflict, []string{
	"volume is in use", "volume is being used",
	"image is being used", "image is in use", "dependent child images", "referenced in multiple repositories",
}}

// classifyHeld is classify for the removal of a volume or an image: a
// refusal because it is used is ErrInUse.
func classifyHeld(what string, err error) error {
	if err != nil && !notFound.says(err) && held.says(err) {
		return fmt.Errorf("%s: %w: %s", what, backend.ErrInUse, err.Error())
	}
	return classify(what, err)
}

// listImages lists the images, intermediate ones too, that carry label
// ("key=value"). Podman fails a listing that meets an image another
// removal is taking away (imageGoing): it is asked again, a few times,
// before that is an error.
func listImages(ctx context.Context, cli *client.Client, label string) (client.ImageListResult, error) {
	for try := 1; ; try++ {
		il, err := cli.ImageList(ctx, client.ImageListOptions{All: true, Filters: client.Filters{}.Add("label", label)})
		if err == nil || try == 5 || !imageGoing(err) {
			return il, err
		}
		select {
		case <-ctx.Done():
			return il, err
		case <-time.After(time.Duration(try) * 100 * time.Millisecond):
		}
	}
}

// imageGoing: Podman 4.3's answer about an image another removal is
// taking away at that moment, whose record is still listed while its
// parts are gone. Which part a reader meets first says it: "checking if
// image … is dangling: … image not known" (seen when a run's two images
// went at once), or, once the image's blobs went before its record,
// "reading data blob size "manifest" for "…": size is not known" (seen
// in an inspect of an image a watchdog was removing; a listing reads the
// same blobs for each image's labels and size).
func imageGoing(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "image not known") || strings.Contains(err.Error(), "size is not known"))
}

// imageID is the bare hex of an image id ("sha256:<hex>" or "<hex>").
func imageID(id string) string { return strings.TrimPrefix(id, "sha256:") }

// removeHeld removes the volume, or the images, a ledger line names, when
// the engine shows them run runID's. A volume's line is its name. An
// image's is the mark its build was given (backend.LabelImage), written
// before the build: every image carrying it and the run's image label is
// removed by its id, so that a tag the build took from an older image
// (which keeps its id, and has no such label) leaves that image alone.
func (d *Driver) removeHeld(ctx context.Context, k backend.Kind, runID, name string, remove bool) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	if k == backend.VolumeKind {
		res, err := d.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
		if err != nil {
			return classify("inspect volume "+name, err)
		}
		if err := notOwnedErr(k, name, "", backend.NotOwnedWhy(runID, res.Volume.Name, res.Volume.Labels)); err != nil {
			return err
		}
		if !remove {
			return nil
		}
		return d.removeVolume(ctx, name)
	}
	il, err := listImages(ctx, d.cli, backend.LabelImage+"="+name)
	if err != nil {
		return classify("list images of "+name, err)
	}
	var errs, others []error
	found := 0
	for _, im := range tips(il.Items) {
		if im.Labels[backend.LabelImage] != name {
			continue
		}
		found++
		if err := notOwnedErr(k, name, imageID(im.ID), backend.ImageNotOwnedWhy(runID, im.Labels)); err != nil {
			others = append(others, err)
			continue
		}
		if !remove {
			continue
		}
		if err := d.removeImage(ctx, imageID(im.ID)); err != nil && !errors.Is(err, backend.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	switch {
	case len(errs) > 0:
		return errors.Join(errs...)
	case found == 0:
		return fmt.Errorf("image %s: %w", name, backend.ErrNotFound)
	case len(others) > 0:
		return errors.Join(others...)
	}
	return nil
}

func notOwnedErr(k backend.Kind, name, id, why string) error {
	what := k.String() + " " + name
	if id != "" {
		what += " (" + shortID(id) + ")"
	}
	switch why {
	case "":
		return nil
	case backend.UnlabelledWhy:
		return fmt.Errorf("%s: %w: %w", what, backend.ErrNotOwned, backend.ErrUnlabelled)
	}
	return fmt.Errorf("%s: %w: %s", what, backend.ErrNotOwned, why)
}

// removeVolume removes a volume by name, never forced.
func (d *Driver) removeVolume(ctx context.Context, name string) error {
	_, err := d.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
	return classifyHeld("remove volume "+name, err)
}

// removeImage removes an image by its id, never forced; then the
// parents the run's builds made (the classic builder's intermediate images,
// which hold its layers): untagged, made since the run's first build began
// (backend.LabelImageSince, by the engine's clock), and used by nothing
// else. The engine's own pruning of parents is not asked for: it would
// remove an untagged parent that was there before the build (an image
// whose tag the build took, built FROM).
func (d *Driver) removeImage(ctx context.Context, id string) error {
	self, _ := d.imageNode(ctx, id)
	if err := d.imageUnused(ctx, id); err != nil {
		return err
	}
	_, err := d.cli.ImageRemove(ctx, "sha256:"+imageID(id), client.ImageRemoveOptions{})
	if err = classifyHeld("remove image "+shortID(imageID(id)), err); err != nil {
		return err
	}
	since, serr := time.Parse(time.RFC3339Nano, self.since)
	for parent := self.Parent; parent != ""; {
		p, err := d.imageNode(ctx, parent)
		if err != nil || len(p.RepoTags) > 0 {
			break
		}
		// The build's own label steps carry its mark; the steps before,
		// only their time.
		ours := self.mark != "" && p.mark == self.mark
		if created, cerr := time.Parse(time.RFC3339Nano, p.Created); !ours && (serr != nil || cerr != nil || created.Before(since)) {
			break
		}
		// Refused (another child, a container of it): it stays, and so
		// do its parents.
		if d.imageUnused(ctx, parent) != nil {
			break
		}
		if _, err := d.cli.ImageRemove(ctx, parent, client.ImageRemoveOptions{}); err != nil {
			break
		}
		parent = p.Parent
	}
	return nil
}

// imageUnused is ErrInUse when a container, running or not, is of image
// id (or of an image built on it): asked first, not left to the engine's
// refusal alone (Podman 4.3's Docker API removed, in a test here, an
// image that a created container was of).
func (d *Driver) imageUnused(ctx context.Context, id string) error {
	cl, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("ancestor", "sha256:"+imageID(id))})
	if err != nil {
		return classify("list the containers of image "+shortID(imageID(id)), err)
	}
	if len(cl.Items) > 0 {
		return fmt.Errorf("remove image %s: %w: %d container(s) of it, such as %s", shortID(imageID(id)), backend.ErrInUse, len(cl.Items), shortID(cl.Items[0].ID))
	}
	return nil
}

// imageNode is what removeImage needs of an image: its parent (which the
// API's types no longer hold, and the engine still says), tags, creation
// and the build's start.
type imageNode struct {
	ID       string `json:"Id"`
	Parent   string
	RepoTags []string
	Created  string
	Config   struct{ Labels map[string]string }
	since    string
	mark     string // its backend.LabelImage
}

func (d *Driver) imageNode(ctx context.Context, id string) (imageNode, error) {
	var raw bytes.Buffer
	var n imageNode
	if _, err := d.cli.ImageInspect(ctx, id, client.ImageInspectWithRawResponse(&raw)); err != nil {
		return n, err
	}
	if err := json.Unmarshal(raw.Bytes(), &n); err != nil {
		return n, err
	}
	n.since, n.mark = n.Config.Labels[backend.LabelImageSince], n.Config.Labels[backend.LabelImage]
	return n, nil
}

// findHeld is findRun for volumes (labelled with the run, by name) and
// images (labelled with the run's image label, by id).
func (d *Driver) findHeld(ctx context.Context, k backend.Kind, runID string) ([]backend.Found, error) {
	var found []backend.Found
	if k == backend.ImageKind {
		il, err := listImages(ctx, d.cli, backend.LabelImageRun+"="+runID)
		if err != nil {
			return nil, classify("list images", err)
		}
		for _, im := range tips(il.Items) {
			if backend.ImageNotOwnedWhy(runID, im.Labels) == "" {
				found = append(found, backend.Found{ID: imageID(im.ID), Name: cmpOr(im.Labels[backend.LabelImage], imageID(im.ID))})
			}
		}
	} else {
		for _, label := range []string{LabelRunID, LabelRunIDAlt} {
			vl, err := d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", label+"="+runID)})
			if err != nil {
				return nil, classify("list volumes", err)
			}
			for _, v := range vl.Items {
				if backend.NotOwnedWhy(runID, v.Name, v.Labels) == "" && !slices.ContainsFunc(found, func(f backend.Found) bool { return f.ID == v.Name }) {
					found = append(found, backend.Found{ID: v.Name, Name: v.Name})
				}
			}
		}
	}
	slices.SortFunc(found, func(a, b backend.Found) int { return strings.Compare(a.ID, b.ID) })
	return found, nil
}

// tips are, of images, those that are no other's parent: a build's
// labels come as its last steps, so the classic builder's intermediate
// images carry some of them too, and go with the image they lead to
// (removeImage).
func tips(images []image.Summary) []image.Summary {
	var out []image.Summary
	for _, im := range images {
		if !slices.ContainsFunc(images, func(c image.Summary) bool { return c.ParentID == im.ID }) {
			out = append(out, im)
		}
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
