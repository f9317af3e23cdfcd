package ledger

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/origin"
	"github.com/rightsize/rightsize-go/internal/procid"
)

// Owner describes what a run's record says about its backend.
type Owner struct {
	Backend  string // "docker", "msb" or "local"
	Endpoint string // the engine, e.g. "unix:///var/run/docker.sock"
	MsbPath  string // msb only: absolute path of the msb binary
	// DefaultEngine: Endpoint is the engine a process with no
	// configuration reaches, the only one the other members' sweeps
	// reach (backend.Backend.DefaultEndpoint).
	DefaultEngine bool
}

// Run is this process's run: its id, its record, and the two lists. The
// record is written before the first line, deleted with the lists when both
// become empty, and written again before the next line. A Run is safe for
// use by many goroutines at once.
type Run struct {
	dir string // the runs folder
	id  string
	rec Record
	// family: the record is also written where the other members read it
	// (FamilyJudges).
	family bool

	mu       sync.Mutex
	recorded bool
	lists    [len(Kinds)][]string
	// origins are what made each name, as written to the run's origins
	// file (origins.go); fates is the folder it is in, once made.
	origins Origins
	fates   string
}

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
	if me.Start.IsZero() {
		// Every other member reaps a record without a start while its
		// owner lives: never write one.
		return nil, errors.New("ledger: this process's start time is unknown, and a record without one would be reaped by the other members of the family while this process runs")
	}
	rec := Record{
		PID:          me.PID,
		StartedISO:   FormatISO(me.Start),
		Backend:      names.CanonicalBackend(o.Backend),
		StartTicks:   me.StartTicks,
		BootID:       me.BootID,
		PidNamespace: me.PidNamespace,
		Endpoint:     o.Endpoint,
		Writer:       "go",
	}
	if rec.Backend == "msb" {
		rec.MsbPath = o.MsbPath
	}
	family := FamilyJudges(o)
	for {
		id, err := NewRunID()
		if err != nil {
			return nil, err
		}
		if !HasFiles(dir, id) {
			return &Run{dir: dir, id: id, rec: rec, family: family}, nil
		}
	}
}

// FamilyJudges reports whether the other members of the family judge a run
// of this process owned by o as rightsize-go does, so that its record may
// be where they read it (runs/<id>.json). They cannot when:
//
//   - its backend is not docker or msb (the Node member reads any other
//     as an unparseable record, and deletes it once an hour old);
//   - its engine is not the default one (they record no engine, and a
//     sweep of theirs through the default one would forget its names as
//     gone);
//   - this process is outside the host's pid namespace (they record
//     none, and look the pid up in theirs);
//   - there is no ps on the PATH (the Node and Rust members learn a start
//     time from ps, and without one judge every run dead).
//
// Otherwise the record is Go's own only (OwnRecordExt), which they never
// see: Go's own sweeps and watchdogs reap such a run.
func FamilyJudges(o Owner) bool {
	switch names.CanonicalBackend(o.Backend) {
	case "docker", "msb":
	default:
		return false
	}
	return o.DefaultEngine && procid.InInitialPidNamespace() && psOnPath()
}

// psOnPath reports whether a ps command is on the PATH, looked up once.
var psOnPath = sync.OnceValue(func() bool {
	if runtime.GOOS == "windows" {
		return true // the members ask the system there, not ps
	}
	_, err := exec.LookPath("ps")
	return err == nil
})

// Family reports whether the run's record is also the family's.
func (r *Run) Family() bool { return r.family }

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

// Add records a name of kind k. Call it before asking the backend to
// create what it names; on error, do not create it.
func (r *Run) Add(k Kind, name string) error { return r.add(k, name, origin.Origin{}) }

// AddFrom is Add of what o made: o goes to the run's origins first. An
// origin that cannot be written is not told later (no create fails for
// want of it); Origin still says it while this process runs.
func (r *Run) AddFrom(k Kind, name string, o origin.Origin) error { return r.add(k, name, o) }

// Origin is what made name of kind k, as AddFrom was told; zero when
// unknown.
func (r *Run) Origin(k Kind, name string) origin.Origin {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.origins.Of(k, name)
}

// Remove forgets a name of kind k. Call it only once the backend has
// confirmed it gone (or never there, or not this run's).
func (r *Run) Remove(k Kind, name string) error { return r.remove(k, name) }

// Names returns the names of kind k the run lists now.
func (r *Run) Names(k Kind) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lists[k])
}

// Len is how many names the run lists now, of every kind.
func (r *Run) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lists {
		n += len(l)
	}
	return n
}

func (r *Run) add(k Kind, name string, o origin.Origin) error {
	if !ValidName(name) {
		return fmt.Errorf("ledger: %q is not a valid name (a name is %s)", name, names.Rule)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.recorded {
		if err := writeRecords(r.dir, r.id, r.rec.Marshal(), r.family); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		r.recorded = true
	}
	if !o.IsZero() {
		r.addOrigin(k, name, o)
	}
	p := LinePath(r.dir, r.id, k)
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
		if rerr := WriteLines(p, r.lists[k]); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("ledger: append to %s: %w", p, err)
	}
	r.lists[k] = append(r.lists[k], name)
	return nil
}

func (r *Run) remove(k Kind, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.Index(r.lists[k], name)
	if i < 0 {
		return nil
	}
	rest := slices.Delete(slices.Clone(r.lists[k]), i, i+1)
	empty := len(rest) == 0
	for other, l := range r.lists {
		if Kind(other) != k && len(l) > 0 {
			empty = false
		}
	}
	if empty {
		// Line files before the record: no reader sees lines without one.
		if err := RemoveRunFiles(r.dir, r.id); err != nil {
			return fmt.Errorf("ledger: prune run %s: %w", r.id, err)
		}
		if r.fates != "" {
			_ = RemoveOrigins(filepath.Dir(r.dir), r.id)
		}
		r.lists[k] = nil
		r.recorded = false
		r.origins = nil
		return nil
	}
	if err := WriteLines(LinePath(r.dir, r.id, k), rest); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	r.lists[k] = rest
	return nil
}

// addOrigin writes and keeps the origin of name; called with r.mu held.
func (r *Run) addOrigin(k Kind, name string, o origin.Origin) {
	if r.origins == nil {
		r.origins = Origins{}
	}
	r.origins.set(k, name, o.Bounded())
	if r.fates == "" {
		dir, err := EnsureSubdir(filepath.Dir(r.dir), FatesDir)
		if err != nil {
			return
		}
		r.fates = dir
	}
	_ = appendOrigin(filepath.Join(r.fates, "."+r.id+originsSuffix), k, name, o)
}
