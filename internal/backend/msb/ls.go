package msb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// How `msb ls --format json` spells a sandbox's status (msb's enum names,
// capitalised): running, and on its way there.
const (
	statusRunning  = "Running"
	statusCreated  = "Created"
	statusStarting = "Starting"
)

// lsEntry is one object of `msb ls --format json`. msb also prints
// created_at and image; only these two are read. Both are pointers so that
// an object missing one is skipped rather than read as the name "".
type lsEntry struct {
	Name   *string `json:"name"`
	Status *string `json:"status"`
}

// parseLs reads `msb ls --format json` into name → status.
func parseLs(out string) (map[string]string, error) {
	statuses := map[string]string{}
	if strings.TrimSpace(out) == "" {
		return statuses, nil
	}
	var entries []lsEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		return nil, fmt.Errorf("msb ls --format json printed something other than a JSON array of sandboxes (%v): %s", err, shown(out))
	}
	for _, e := range entries {
		if e.Name == nil || e.Status == nil {
			continue
		}
		statuses[*e.Name] = *e.Status
	}
	return statuses, nil
}

// list runs `msb ls --format json`: every sandbox msb knows, by name.
func (d *Driver) list(ctx context.Context) (map[string]string, error) {
	r := d.runRetrying(ctx, "ls", "--format", "json")
	if r.err != nil {
		return nil, r.failure()
	}
	return parseLs(r.stdout)
}

// inspected is what is read of `msb inspect NAME --format json`: the
// sandbox's status and its labels (config.labels, which hold the image's
// labels too, as a container's do on Docker).
type inspected struct {
	status string
	labels map[string]string
}

type inspectJSON struct {
	Name   *string `json:"name"`
	Status *string `json:"status"`
	Config *struct {
		Labels map[string]string `json:"labels"`
	} `json:"config"`
}

// parseInspect reads `msb inspect NAME --format json`; an object that is
// not name's, or that lacks its status or configuration, is an error (the
// sandbox may exist: nothing is decided on it).
func parseInspect(name, out string) (inspected, error) {
	var j inspectJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		return inspected{}, fmt.Errorf("msb inspect %s --format json printed something other than a JSON object (%v): %s", name, err, shown(out))
	}
	if j.Name == nil || *j.Name != name || j.Status == nil || j.Config == nil {
		return inspected{}, fmt.Errorf("msb inspect %s --format json printed no name %q with a status and a config: %s", name, name, shown(out))
	}
	return inspected{status: *j.Status, labels: j.Config.Labels}, nil
}

// inspect runs `msb inspect NAME --format json`; an error wraps
// backend.ErrNotFound when msb has no sandbox of that name.
func (d *Driver) inspect(ctx context.Context, name string) (inspected, error) {
	r := d.runRetrying(ctx, "inspect", name, "--format", "json")
	if r.notFound() {
		return inspected{}, fmt.Errorf("msb sandbox %s: %w (msb: %s)", name, backend.ErrNotFound, shown(r.stderr))
	}
	if r.err != nil {
		return inspected{}, r.failure()
	}
	return parseInspect(name, r.stdout)
}
