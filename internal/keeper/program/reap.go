package main

import (
	"fmt"
	"log"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// The marks of the rightsize family on the engine (package backend/docker
// writes them; a test of package internal/keeper holds the two in step).
const (
	labelRun    = "dev.rightsize.runId"
	labelRunAlt = "dev.rightsize.run_id"
	// labelReuse starts every label of a keep-alive container, which no
	// run ever removes.
	labelReuse      = "dev.rightsize.reuse"
	keepAlivePrefix = "rz-reuse-"
	labelKeeper     = "dev.rightsize.keeper"
	keeperPrefix    = "rz-keeper-"
)

// reapBudget bounds the retries of what could not be removed at once (a
// network another run's container still uses); then the keeper gives up.
const reapBudget = time.Minute

// owned reports whether a container or network named name with labels
// is run's to remove: it carries the run's label under either spelling,
// and is neither a keep-alive sandbox nor a keeper.
func owned(run, name string, labels map[string]string) bool {
	if run == "" || strings.HasPrefix(strings.TrimPrefix(name, "/"), keepAlivePrefix) {
		return false
	}
	for k := range labels {
		if strings.HasPrefix(k, labelReuse) || k == labelKeeper {
			return false
		}
	}
	return labels[labelRun] == run || labels[labelRunAlt] == run
}

// reaper removes a run's containers, then its networks, then its named
// volumes and built images (passHeld).
type reaper struct {
	eng      *engine
	run      string
	parallel int
	// settle is how long after the first pass the second one looks again,
	// for a create the engine finished after the lease ended.
	settle time.Duration
	budget time.Duration
}

// item is a container or a network of the run.
type item struct{ id, name string }

// reap removes everything of the run, looking again until a look finds
// nothing, or the budget has passed; it reports whether nothing was left.
func (r *reaper) reap() bool {
	start := time.Now()
	deadline := start.Add(r.budget)
	wait := r.settle
	removed := 0
	for pass := 1; ; pass++ {
		n, left := r.pass()
		removed += n
		if n == 0 && len(left) == 0 {
			log.Printf("run %s: %d removed in %s; nothing of the run is left", r.run, removed, time.Since(start).Round(time.Millisecond))
			return true
		}
		if len(left) > 0 {
			log.Printf("run %s: pass %d: left for now: %s", r.run, pass, strings.Join(left, "; "))
		}
		if time.Now().Add(wait).After(deadline) {
			log.Printf("run %s: %d removed; giving up after %s on: %s", r.run, removed, time.Since(start).Round(time.Millisecond), strings.Join(left, "; "))
			return false
		}
		time.Sleep(wait)
		wait = min(max(wait, 250*time.Millisecond), time.Second)
	}
}

// pass removes what it finds of the run; it returns how many it removed
// and what it could not remove, and why.
func (r *reaper) pass() (removed int, left []string) {
	ctrs, podman, err := r.list("/containers/json?all=1&")
	if err != nil {
		return 0, []string{err.Error()}
	}
	var mu sync.Mutex
	note := func(ok bool, why string) {
		mu.Lock()
		defer mu.Unlock()
		if ok {
			removed++
		} else {
			left = append(left, why)
		}
	}
	work := make(chan item)
	var wg sync.WaitGroup
	for range min(r.parallel, max(len(ctrs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				path := "/containers/" + url.PathEscape(c.id) + "?force=1&v=1"
				if podman {
					// Podman's forced removal through Docker's API stops a
					// running container with its stop signal and timeout
					// first (10 s for a libpod-created one that ignores
					// SIGTERM); its own API takes a timeout of 0. Docker's
					// kills at once.
					path = "/v4.0.0/libpod/containers/" + url.PathEscape(c.id) + "?force=true&timeout=0&volumes=true"
				}
				err := r.eng.call("DELETE", path, nil)
				if err != nil && codeOf(err) != 404 {
					note(false, fmt.Sprintf("container %s: %v", c.name, err))
					continue
				}
				log.Printf("run %s: removed container %s (%s)", r.run, c.name, short(c.id))
				note(true, "")
			}
		}()
	}
	for _, c := range ctrs {
		work <- c
	}
	close(work)
	wg.Wait()

	nets, _, err := r.list("/networks?")
	if err != nil {
		return removed, append(left, err.Error())
	}
	for _, n := range nets {
		if err := r.removeNetwork(n); err != nil {
			note(false, fmt.Sprintf("network %s: %v", n.name, err))
			continue
		}
		log.Printf("run %s: removed network %s (%s)", r.run, n.name, short(n.id))
		note(true, "")
	}
	n, more := r.passHeld()
	return removed + n, append(left, more...)
}

// removeNetwork removes a network none of whose containers is left.
// Podman removes a network by id from under the containers attached to it,
// which may be another run's or a keep-alive sandbox: refused here, as
// Docker refuses it.
func (r *reaper) removeNetwork(n item) error {
	var info struct {
		Containers map[string]any
	}
	path := "/networks/" + url.PathEscape(n.id)
	if err := r.eng.call("GET", path, &info); err != nil {
		if codeOf(err) == 404 {
			return nil
		}
		return err
	}
	if len(info.Containers) > 0 {
		return fmt.Errorf("in use by %d container(s) of others", len(info.Containers))
	}
	if err := r.eng.call("DELETE", path, nil); err != nil && codeOf(err) != 404 {
		return err
	}
	return nil
}

// list returns the run's containers or networks (prefix is the list's
// path up to its query), under both spellings of its label, each once.
func (r *reaper) list(prefix string) (items []item, podman bool, err error) {
	seen := map[string]bool{}
	for _, key := range []string{labelRun, labelRunAlt} {
		var got []struct {
			ID     string `json:"Id"`
			Name   string
			Names  []string
			Labels map[string]string
		}
		hdr, err := r.eng.callHeaders("GET", prefix+filterQuery(key, r.run), &got)
		if err != nil {
			return nil, false, err
		}
		// Podman answers its Docker-compatible API with its own version.
		_, libpod := hdr["libpod-api-version"]
		podman = podman || libpod
		for _, g := range got {
			name := g.Name
			if len(g.Names) > 0 {
				name = strings.TrimPrefix(g.Names[0], "/")
			}
			// The engine's filter is a hint: what is removed is checked
			// here again.
			if g.ID == "" || seen[g.ID] || !owned(r.run, name, g.Labels) {
				continue
			}
			seen[g.ID] = true
			items = append(items, item{id: g.ID, name: name})
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].id < items[j].id })
	return items, podman, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
