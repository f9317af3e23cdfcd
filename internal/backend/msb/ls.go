package msb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
