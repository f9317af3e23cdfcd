package main

import (
	"fmt"
	"log"
	"net/url"
	"sort"
	"strings"
	"time"
)

// The marks of what a run holds besides containers and networks: the
// named volumes and the images a test made through GuardAll's proxy
// (package backend writes them; a test of package internal/keeper holds
// them in step). A volume carries the run's label; an image carries
// labelImageRun, labelImage (its ledger line) and labelImageSince (when
// the run's first build began, by the engine's clock).
const (
	labelImageRun   = "dev.rightsize.image.runId"
	labelImage      = "dev.rightsize.image"
	labelImageSince = "dev.rightsize.image.since"
)

// passHeld removes the run's named volumes, then its images; an image a
// container of others still uses is kept (as the engine would refuse it),
// and said so, not counted as left.
func (r *reaper) passHeld() (removed int, left []string) {
	vols, err := r.volumes()
	if err != nil {
		left = append(left, err.Error())
	}
	for _, v := range vols {
		err := r.eng.call("DELETE", "/volumes/"+url.PathEscape(v), nil)
		if err != nil && codeOf(err) != 404 {
			left = append(left, fmt.Sprintf("volume %s: %v", v, err))
			continue
		}
		log.Printf("run %s: removed volume %s", r.run, v)
		removed++
	}
	imgs, err := r.images()
	if err != nil {
		return removed, append(left, err.Error())
	}
	for _, id := range imgs {
		kept, err := r.removeImage(id)
		switch {
		case err != nil:
			left = append(left, fmt.Sprintf("image %s: %v", short(strings.TrimPrefix(id, "sha256:")), err))
		case kept:
			log.Printf("run %s: kept image %s: a container of others uses it", r.run, short(strings.TrimPrefix(id, "sha256:")))
		default:
			log.Printf("run %s: removed image %s", r.run, short(strings.TrimPrefix(id, "sha256:")))
			removed++
		}
	}
	return removed, left
}

// volumes lists the run's named volumes, under both spellings of its
// label, each once.
func (r *reaper) volumes() ([]string, error) {
	seen := map[string]bool{}
	var names []string
	for _, key := range []string{labelRun, labelRunAlt} {
		var got struct {
			Volumes []struct {
				Name   string
				Labels map[string]string
			}
		}
		if err := r.eng.call("GET", "/volumes?"+filterQuery(key, r.run), &got); err != nil {
			return nil, err
		}
		for _, v := range got.Volumes {
			if v.Name == "" || seen[v.Name] || !owned(r.run, v.Name, v.Labels) {
				continue
			}
			seen[v.Name] = true
			names = append(names, v.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// images lists the run's built images that are no other's parent: the
// classic builder's intermediate images carry some of a build's labels
// too, and go with the image they lead to (removeImage).
func (r *reaper) images() ([]string, error) {
	var got []struct {
		ID       string `json:"Id"`
		ParentID string `json:"ParentId"`
		Labels   map[string]string
	}
	if err := r.eng.call("GET", "/images/json?all=1&"+filterQuery(labelImageRun, r.run), &got); err != nil {
		return nil, err
	}
	parents := map[string]bool{}
	for _, im := range got {
		parents[im.ParentID] = true
	}
	var ids []string
	for _, im := range got {
		// The engine's filter is a hint: the label is checked here again.
		if im.ID != "" && !parents[im.ID] && im.Labels[labelImageRun] == r.run {
			ids = append(ids, im.ID)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// imageInfo is what removeImage needs of an image.
type imageInfo struct {
	Parent   string
	RepoTags []string
	Created  string
	Config   struct{ Labels map[string]string }
}

// removeImage removes image id, never forced, unless a container (any
// container: the run's are gone by now) is of it; then the parents the
// run's builds made, untagged, made since the run's first build began or
// carrying the build's own mark, and used by nothing else. An image that
// was there before the build (whose tag the build took, or that it was
// built FROM) is older than the build and is never reached: the engine's
// own pruning of untagged parents, which would reach it, is turned off
// (noprune).
func (r *reaper) removeImage(id string) (kept bool, err error) {
	var self imageInfo
	if err := r.eng.call("GET", "/images/"+url.PathEscape(id)+"/json", &self); err != nil {
		if codeOf(err) == 404 {
			return false, nil
		}
		return false, err
	}
	if used, err := r.imageUsed(id); err != nil || used {
		return used, err
	}
	if err := r.eng.call("DELETE", "/images/"+url.PathEscape(id)+"?noprune=1", nil); err != nil {
		switch codeOf(err) {
		case 404:
			return false, nil
		case 409:
			return true, nil
		}
		return false, err
	}
	mark := self.Config.Labels[labelImage]
	since, serr := time.Parse(time.RFC3339Nano, self.Config.Labels[labelImageSince])
	for parent := self.Parent; parent != ""; {
		var p imageInfo
		if err := r.eng.call("GET", "/images/"+url.PathEscape(parent)+"/json", &p); err != nil || len(p.RepoTags) > 0 {
			break
		}
		ours := mark != "" && p.Config.Labels[labelImage] == mark
		if created, cerr := time.Parse(time.RFC3339Nano, p.Created); !ours && (serr != nil || cerr != nil || created.Before(since)) {
			break
		}
		if used, err := r.imageUsed(parent); err != nil || used {
			break
		}
		if err := r.eng.call("DELETE", "/images/"+url.PathEscape(parent)+"?noprune=1", nil); err != nil {
			break
		}
		parent = p.Parent
	}
	return false, nil
}

// imageUsed reports whether a container, running or not, is of image id
// (asked first, not left to the engine's refusal alone: Podman 4.3's
// Docker API removed an image that a created container was of).
func (r *reaper) imageUsed(id string) (bool, error) {
	var got []struct {
		ID string `json:"Id"`
	}
	if err := r.eng.call("GET", "/containers/json?all=1&"+filtersParam("ancestor", id), &got); err != nil {
		return false, err
	}
	return len(got) > 0, nil
}
