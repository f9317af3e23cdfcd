package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

// Keep-alive sandboxes are known from two sides: the registry under the
// cache dir (reuse/<hash>.json, written by whichever member created one)
// and the engine (Docker's dev.rightsize.reuse label; msb's rz-reuse-
// names). Neither is the whole truth: an entry outlives a sandbox removed
// by hand, and a sandbox made from another cache dir (another user,
// another member's settings) has no entry here.

// regEntry is one registry file.
type regEntry struct {
	hash  string
	entry ledger.ReuseEntry
	// err: the file could not be read or parsed; name is then the one the
	// hash gives.
	err  error
	name string
	// mod is the file's modification time: an entry written after the
	// engine was listed belongs to a sandbox the listing did not see.
	mod time.Time
}

// backendMatches reports whether the entry may describe a sandbox of
// engine backend name: an unreadable entry may.
func (e regEntry) backendMatches(name string) bool {
	return e.err != nil || e.entry.Backend == "" || backend.Canonical(e.entry.Backend) == backend.Canonical(name)
}

// readRegistry reads every entry of cache's keep-alive registry, sorted by
// hash. A missing registry is empty.
func readRegistry(cache string) ([]regEntry, error) {
	hashes, err := ledger.ReuseHashes(cache)
	if err != nil {
		return nil, fmt.Errorf("keep-alive registry %s: %w", filepath.Join(cache, ledger.ReuseDir), err)
	}
	out := make([]regEntry, 0, len(hashes))
	for _, h := range hashes {
		e := regEntry{hash: h}
		e.entry, e.err = ledger.ReadReuseEntry(cache, h)
		e.name = e.entry.Name
		if e.err != nil || e.name == "" {
			e.name = ledger.ReuseName(h)
		}
		if fi, err := os.Lstat(ledger.ReusePath(cache, h)); err == nil {
			e.mod = fi.ModTime()
		}
		out = append(out, e)
	}
	return out, nil
}

// engineView is what the engine said of its keep-alive sandboxes.
type engineView struct {
	drv backend.Driver // nil when no engine answered
	ka  backend.KeepAliver
	// err says why the engine could not be asked (ka is nil then).
	err error
	// none: the backend makes no keep-alive sandboxes (err says so).
	none   bool
	list   []backend.Description
	byName map[string]backend.Description
	// listed is when the engine was asked.
	listed time.Time
}

// askEngine opens the engine and lists its keep-alive sandboxes, within
// ctx. The caller closes v.drv when it is set.
func askEngine(ctx context.Context) (v engineView) {
	drv, err := openEngine(ctx)
	if err != nil {
		v.err = err
		return v
	}
	v.drv = drv
	ka, ok := drv.(backend.KeepAliver)
	if !ok {
		v.err, v.none = fmt.Errorf("the %s backend makes no keep-alive sandboxes", drv.Name()), true
		return v
	}
	v.listed = time.Now()
	list, err := ka.KeepAlives(ctx)
	if err != nil {
		v.err = err
		return v
	}
	slices.SortFunc(list, func(a, b backend.Description) int { return strings.Compare(a.Name, b.Name) })
	v.ka, v.list = ka, list
	v.byName = make(map[string]backend.Description, len(list))
	for _, d := range list {
		v.byName[d.Name] = d
	}
	return v
}

func (v engineView) close() {
	if v.drv != nil {
		v.drv.Close()
	}
}

// where names the engine for headers: "docker engine at unix:///…".
func (v engineView) where() string {
	if v.drv == nil {
		return "no engine"
	}
	return fmt.Sprintf("%s engine at %s", v.drv.Name(), dash(docker.SpokenEndpoint(v.drv.Endpoint())))
}

// Engine states of a keep-alive sandbox, as ls shows them.
const (
	engineRunning = "running"
	engineStopped = "stopped"
	engineGone    = "gone"
	engineUnknown = "?"
)

func engineState(d backend.Description) string {
	if d.Running {
		return engineRunning
	}
	return engineStopped
}

// kaRow is one keep-alive sandbox as `rightsize ls --keep-alive --json`
// prints it. The field names are part of the command's contract (see
// `rightsize help ls`): add, never rename.
type kaRow struct {
	Name string `json:"name"`
	// Hash is the registry entry's (64 hex); "" when there is none.
	Hash  string `json:"hash"`
	Image string `json:"image"`
	// CreatedISO is the entry's createdIso, else when the engine says it
	// created the sandbox; "" when neither says.
	CreatedISO string `json:"createdIso"`
	// AgeSeconds is the time since CreatedISO; null when unknown.
	AgeSeconds *int64         `json:"ageSeconds"`
	Ports      map[string]int `json:"ports"`
	UDPPorts   map[string]int `json:"udpPorts"`
	Backend    string         `json:"backend"`
	// Engine: running, stopped, gone, or "?" (the engine could not be
	// asked, or the entry is another backend's).
	Engine string `json:"engine"`
	// Entry: the registry holds an entry for it.
	Entry bool `json:"entry"`
	// Error says why the entry could not be read ("" otherwise).
	Error string `json:"error"`
	Note  string `json:"note"`
	// LastUsedISO is its latest use seen ("" when none; the engine was
	// not asked); LastUsedBy says what showed it.
	LastUsedISO string `json:"lastUsedIso"`
	LastUsedBy  string `json:"lastUsedBy"`
	// InUse: a rightsize-go test process holds it now.
	InUse bool `json:"inUse"`
	// TTLSeconds is the idle time-to-live that applies (null: none);
	// TTLFrom says whose it is.
	TTLSeconds *int64 `json:"ttlSeconds"`
	TTLFrom    string `json:"ttlFrom"`
	// ExpiresISO is when the next sweep removes it ("" when never).
	ExpiresISO string `json:"expiresIso"`
	// SupersededBy is the keep-alive that replaced it ("" when none).
	SupersededBy string `json:"supersededBy"`
	// Unseen says why it is kept however long it seems idle.
	Unseen string `json:"unseen"`

	age   time.Duration
	known bool // age is known
	use   *reaper.KeepAliveUse
}

// joinKeepAlives lists every keep-alive sandbox the registry or the engine
// knows, sorted by name: one row per registry entry, joined by name with
// what the engine says, then one per sandbox of the engine with no entry.
func joinKeepAlives(entries []regEntry, v engineView, now time.Time) []kaRow {
	var rows []kaRow
	seen := map[string]bool{}
	for _, e := range entries {
		r := kaRow{Name: e.name, Hash: e.hash, Entry: true, Ports: map[string]int{}, UDPPorts: map[string]int{}}
		if e.err != nil {
			r.Error = e.err.Error()
			r.Note = "entry unreadable: " + r.Error
		} else {
			r.Image, r.CreatedISO, r.Backend = e.entry.Image, e.entry.CreatedISO, e.entry.Backend
			for k, p := range e.entry.Ports {
				r.Ports[k] = p
			}
			for k, p := range e.entry.UDPPorts {
				r.UDPPorts[k] = p
			}
			if t, err := ledger.ParseISO(r.CreatedISO); err == nil {
				r.setAge(t, now)
			}
		}
		switch {
		case v.ka == nil:
			r.Engine = engineUnknown
		case !e.backendMatches(v.drv.Name()):
			r.Engine = engineUnknown
			r.Note = fmt.Sprintf("an %s sandbox; the engine asked is %s", r.Backend, v.drv.Name())
		default:
			d, ok := v.byName[e.name]
			if !ok {
				r.Engine = engineGone
				break
			}
			seen[d.Name] = true
			r.Engine = engineState(d)
			if r.Image == "" {
				r.Image = d.Image
			}
		}
		rows = append(rows, r)
	}
	for _, d := range v.list {
		if seen[d.Name] {
			continue
		}
		r := kaRow{Name: d.Name, Image: d.Image, Ports: map[string]int{}, UDPPorts: map[string]int{},
			Backend: v.drv.Name(), Engine: engineState(d), Note: "no entry"}
		if !d.Created.IsZero() {
			r.CreatedISO = ledger.FormatISO(d.Created)
			r.setAge(d.Created, now)
		}
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b kaRow) int { return strings.Compare(a.Name, b.Name) })
	return rows
}

// judgeUse adds to each row of a sandbox the engine listed its use, as
// the next sweep would judge it (reaper.JudgeKeepAlives). The error says
// why RIGHTSIZE_REUSE_TTL was not read.
func judgeUse(rows []kaRow, cache string, v engineView, now time.Time) error {
	if v.ka == nil {
		return nil
	}
	uses, err := reaper.JudgeKeepAlives(v.drv, cache, v.list, now)
	byName := map[string]reaper.KeepAliveUse{}
	for _, u := range uses {
		byName[u.Name] = u
	}
	for i := range rows {
		u, ok := byName[rows[i].Name]
		if !ok || rows[i].Engine == engineGone || rows[i].Engine == engineUnknown {
			continue
		}
		r := &rows[i]
		r.use = &u
		if !u.LastUsed.IsZero() {
			r.LastUsedISO, r.LastUsedBy = ledger.FormatISO(u.LastUsed), u.By
		}
		r.InUse, r.SupersededBy, r.Unseen = u.InUse, u.SupersededBy, u.Unseen
		if u.TTL > 0 {
			s := int64(u.TTL / time.Second)
			r.TTLSeconds, r.TTLFrom = &s, u.From
		}
		if e := u.Expires(); !e.IsZero() {
			r.ExpiresISO = ledger.FormatISO(e)
		}
	}
	return err
}

// lastUse is the LAST USE column: how long ago, "now" when in use.
func (r kaRow) lastUse(now time.Time) string {
	switch {
	case r.use == nil || r.use.LastUsed.IsZero():
		return "-"
	case r.use.InUse:
		return "in use"
	}
	return formatDuration(max(now.Sub(r.use.LastUsed), 0)) + " ago"
}

// expires is the EXPIRES column: "-" with no time-to-live, "kept" when its
// users cannot all be seen, "next sweep" once past it.
func (r kaRow) expires(now time.Time) string {
	switch {
	case r.use == nil || r.use.TTL == 0:
		return "-"
	case r.use.InUse:
		return "in use"
	case r.use.Unseen != "":
		return "kept"
	}
	e := r.use.Expires()
	if !now.Before(e) {
		return "next sweep"
	}
	return "in " + formatDuration(e.Sub(now))
}

// notes is the NOTE column: the row's note, then what its use says.
func (r kaRow) notes() string {
	parts := []string{}
	if r.Note != "" {
		parts = append(parts, r.Note)
	}
	if r.SupersededBy != "" {
		parts = append(parts, "superseded by "+r.SupersededBy)
	}
	if r.use != nil && r.use.TTL > 0 && r.Unseen != "" {
		parts = append(parts, "kept: "+r.Unseen)
	}
	return strings.Join(parts, "; ")
}

func (r *kaRow) setAge(created, now time.Time) {
	r.age, r.known = max(now.Sub(created), 0), true
	s := int64(r.age / time.Second)
	r.AgeSeconds = &s
}

// formatPorts is "5432->32802,8080->32801,53/udp->32000" in guest port
// order, "-" when none.
func formatPorts(tcp, udp map[string]int) string {
	var out []string
	for _, m := range []struct {
		ports  map[string]int
		suffix string
	}{{tcp, ""}, {udp, "/udp"}} {
		keys := make([]string, 0, len(m.ports))
		for k := range m.ports {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			na, ea := strconv.Atoi(a)
			nb, eb := strconv.Atoi(b)
			if ea == nil && eb == nil && na != nb {
				return na - nb
			}
			return strings.Compare(a, b)
		})
		for _, k := range keys {
			out = append(out, fmt.Sprintf("%s%s->%d", k, m.suffix, m.ports[k]))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// entriesNamed returns the entries whose sandbox is name and that may be
// of backend drv.
func entriesNamed(entries []regEntry, name, drv string) []regEntry {
	var out []regEntry
	for _, e := range entries {
		if e.name == name && e.backendMatches(drv) {
			out = append(out, e)
		}
	}
	return out
}

// keepAliveReport is `rightsize ls --keep-alive --json`. The field names
// are part of the command's contract (see `rightsize help ls`).
type keepAliveReport struct {
	CacheDir string `json:"cacheDir"`
	// Backend and Endpoint are the engine's that was asked ("" when none
	// answered).
	Backend  string `json:"backend"`
	Endpoint string `json:"endpoint"`
	// EngineError says why the engine could not be asked ("" when it was).
	EngineError string `json:"engineError"`
	// RegistryError says why the registry could not be read.
	RegistryError string `json:"registryError"`
	// TTLError says why RIGHTSIZE_REUSE_TTL was not read ("" when it was).
	TTLError  string  `json:"ttlError"`
	KeepAlive []kaRow `json:"keepAlive"`

	none bool // the backend makes none: EngineError says so
}

// gatherKeepAlives reads the registry and asks the engine, for at most
// lsEngineTimeout.
func gatherKeepAlives(cache string) keepAliveReport {
	rep := keepAliveReport{CacheDir: cache, KeepAlive: []kaRow{}}
	entries, rerr := readRegistry(cache)
	if rerr != nil {
		rep.RegistryError = rerr.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), lsEngineTimeout)
	defer cancel()
	v := askEngine(ctx)
	defer v.close()
	if v.drv != nil {
		rep.Backend, rep.Endpoint = v.drv.Name(), v.drv.Endpoint()
	}
	rep.none = v.none
	if v.err != nil {
		rep.EngineError = v.err.Error()
		if ctx.Err() != nil {
			rep.EngineError = fmt.Sprintf("no answer within %s (%v)", lsEngineTimeout, v.err)
		}
	}
	now := time.Now()
	if rows := joinKeepAlives(entries, v, now); rows != nil {
		if err := judgeUse(rows, cache, v, now); err != nil {
			rep.TTLError = err.Error()
		}
		rep.KeepAlive = rows
	}
	return rep
}

// lsKeepAlive is `rightsize ls --keep-alive [--json]`: the keep-alive
// sandboxes alone.
func (c *cli) lsKeepAlive(w *bufio.Writer, cache string, asJSON bool) error {
	if !asJSON {
		return c.lsKeepAliveTable(w, cache)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(gatherKeepAlives(cache))
}

// lsKeepAliveTable prints the keep-alive sandboxes: a line saying where
// they were looked for, then a table, or why there is none. An engine that
// cannot be asked is said, never an error: ls works without one.
func (c *cli) lsKeepAliveTable(w io.Writer, cache string) error {
	rep := gatherKeepAlives(cache)
	reg := termtext.Clean(filepath.Join(cache, ledger.ReuseDir))
	engine := "the engine could not be asked: " + oneLine(rep.EngineError)
	if rep.none {
		engine = oneLine(rep.EngineError)
	}
	if rep.EngineError == "" {
		engine = fmt.Sprintf("%s engine at %s", termtext.Quote(rep.Backend), termtext.Quote(dash(docker.SpokenEndpoint(rep.Endpoint))))
	}
	if rep.RegistryError != "" {
		fmt.Fprintf(w, "keep-alive registry not read: %s\n", oneLine(rep.RegistryError))
	}
	if len(rep.KeepAlive) == 0 {
		fmt.Fprintf(w, "no keep-alive sandboxes (registry %s; %s)\n", reg, engine)
		return nil
	}
	fmt.Fprintf(w, "keep-alive sandboxes (registry %s; %s):\n", reg, engine)
	if rep.TTLError != "" {
		fmt.Fprintf(w, "%s; only a Spec.ReuseTTL applies\n", oneLine(rep.TTLError))
	}
	now := time.Now()
	t := &table{}
	t.row("NAME", "IMAGE", "AGE", "LAST USE", "EXPIRES", "PORTS", c.paint(sgrDefault, "ENGINE"), "NOTE")
	for _, r := range rep.KeepAlive {
		age := "-"
		if r.known {
			age = formatDuration(r.age)
		}
		t.row(termtext.Quote(r.Name), termtext.Quote(dash(r.Image)), age, r.lastUse(now), r.expires(now), termtext.Quote(formatPorts(r.Ports, r.UDPPorts)),
			c.paint(engineColour(r.Engine), r.Engine), oneLine(r.notes()))
	}
	return t.write(w)
}

func engineColour(state string) string {
	switch state {
	case engineRunning:
		return sgrGreen
	case engineGone:
		return sgrRed
	case engineStopped, engineUnknown:
		return sgrYellow
	default:
		return sgrDefault
	}
}
