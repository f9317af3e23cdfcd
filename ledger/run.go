package ledger

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/rightsize/rightsize-go/internal/names"
)

// Owner describes what a run's record says about its backend.
type Owner struct {
	Backend  string // "docker" or "msb"
	Endpoint string // the engine, e.g. "unix:///var/run/docker.sock"
	MsbPath  string // msb only: absolute path of the msb binary
}

// Run is this process's run: its id, its record, and the two lists. The
// record is written before the first line, deleted with the lists when both
// become empty, and written again before the next line. A Run is safe for
// use by many goroutines at once.
type Run struct {
	dir string // the runs folder
	id  string
	rec Record

	mu       sync.Mutex
	recorded bool
	lists    [2][]string
}

type list int

const (
	sandboxList list = iota
	networkList
)

// NewRun creates this process's run in cache (creating runs/ if needed).
// Nothing is written until the first name is added.
func NewRun(cache string, o Owner) (*Run, error) {
	dir, err := EnsureSubdir(cache, RunsDir)
	if err != nil {
		return nil, err
	}
	me, err := Self()
	if err != nil {
		return nil, fmt.Errorf("ledger: identity of this process: %w", err)
	}
	rec := Record{
		PID:          me.PID,
		Backend:      names.CanonicalBackend(o.Backend),
		StartTicks:   me.StartTicks,
		BootID:       me.BootID,
		PidNamespace: me.PidNamespace,
		Endpoint:     o.Endpoint,
		Writer:       "go",
	}
	if !me.Start.IsZero() {
		rec.StartedISO = FormatISO(me.Start)
	}
	if rec.Backend == "msb" {
		rec.MsbPath = o.MsbPath
	}
	for {
		id, err := NewRunID()
		if err != nil {
			return nil, err
		}
		recPath, _, _ := Paths(dir, id)
		if _, err := os.Lstat(recPath); errors.Is(err, fs.ErrNotExist) {
			return &Run{dir: dir, id: id, rec: rec}, nil
		}
	}
}

// NewRunID returns 8 lowercase hex characters from crypto/rand.
func NewRunID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("ledger: run id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ID is the run id.
func (r *Run) ID() string { return r.id }

// RunsDir is the folder the run's files are in.
func (r *Run) RunsDir() string { return r.dir }

// Record is what the run's record says (or will say when written).
func (r *Run) Record() Record { return r.rec }

// AddSandbox records a sandbox name. Call it before asking the backend to
// create the sandbox; on error, do not create it.
func (r *Run) AddSandbox(name string) error { return r.add(sandboxList, name) }

// RemoveSandbox forgets a sandbox name. Call it only once the backend has
// confirmed the sandbox gone (or never there).
func (r *Run) RemoveSandbox(name string) error { return r.remove(sandboxList, name) }

// AddNetwork records a network name, before it is created.
func (r *Run) AddNetwork(name string) error { return r.add(networkList, name) }

// RemoveNetwork forgets a network name, once it is confirmed gone.
func (r *Run) RemoveNetwork(name string) error { return r.remove(networkList, name) }

// Sandboxes returns the sandbox names the run lists now.
func (r *Run) Sandboxes() []string { return r.snapshot(sandboxList) }

// Networks returns the network names the run lists now.
func (r *Run) Networks() []string { return r.snapshot(networkList) }

func (r *Run) snapshot(l list) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lists[l])
}

func (r *Run) path(l list) string {
	_, sbx, nets := Paths(r.dir, r.id)
	if l == sandboxList {
		return sbx
	}
	return nets
}

func (r *Run) add(l list, name string) error {
	if !ValidName(name) {
		return fmt.Errorf("ledger: %q is not a valid name (a name is %s)", name, names.Rule)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.recorded {
		recPath, _, _ := Paths(r.dir, r.id)
		if err := writeAtomic(recPath, r.rec.Marshal()); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		r.recorded = true
	}
	p := r.path(l)
	f, err := appendNoFollow(p)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	// One write per line: O_APPEND makes it land whole at the end, and a
	// process killed around it leaves the line either there or not.
	_, werr := f.Write([]byte(name + "\n"))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		// The file may end in a part of the line: put back what is known.
		if rerr := WriteLines(p, r.lists[l]); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("ledger: append to %s: %w", p, err)
	}
	r.lists[l] = append(r.lists[l], name)
	return nil
}

func (r *Run) remove(l list, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.Index(r.lists[l], name)
	if i < 0 {
		return nil
	}
	rest := slices.Delete(slices.Clone(r.lists[l]), i, i+1)
	other := r.lists[1-l]
	if len(rest) == 0 && len(other) == 0 {
		_, sbx, nets := Paths(r.dir, r.id)
		if err := errors.Join(removeIfExists(sbx), removeIfExists(nets)); err != nil {
			return fmt.Errorf("ledger: prune run %s: %w", r.id, err)
		}
		r.lists[l] = nil
		recPath, _, _ := Paths(r.dir, r.id)
		if err := removeIfExists(recPath); err != nil {
			return fmt.Errorf("ledger: prune run %s: %w", r.id, err)
		}
		r.recorded = false
		return nil
	}
	if err := WriteLines(r.path(l), rest); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	r.lists[l] = rest
	return nil
}
