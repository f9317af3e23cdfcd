package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rightsize/rightsize-go/internal/origin"
)

// A run's origins say which test made each of its sandboxes, networks and
// local processes (package origin), for whoever tells of the run once its
// owner is gone: its fate, rightsize ls. They are rightsize-go's own file,
// fates/.<run>.tests beside the owner stub, where the other members never
// look; one JSON object a line, appended before the ledger line of what it
// names, so that nothing is listed without its origin:
//
//	{"kind":"sandbox","name":"rz-1a2b3c4d-1","test":"TestCheckout/eu","place":"store_test.go:42"}
//
// kind is "sandbox", "network" or "process" (a local process by its line,
// p<n>.<session>); a later line of the same name replaces an earlier one.
// The file goes with the run's other files: when its lists empty, when a
// watchdog or a sweep has reaped it all, or, left by a reaper that died,
// with the owner stubs (PruneFates).

// originsSuffix ends the name of a run's origins file.
const originsSuffix = ".tests"

// OriginsPath is the path of run's origins in cache.
func OriginsPath(cache, run string) string {
	return filepath.Join(cache, FatesDir, "."+run+originsSuffix)
}

// maxOrigins bounds what is read of a run's origins: a line is at most
// about 600 bytes (origin bounds its fields), so 10,000 sandboxes fit.
const maxOrigins = 8 << 20

type originLine struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	origin.Origin
}

// Origins are a run's origins, by kind and name.
type Origins map[Kind]map[string]origin.Origin

// Of is what made name of kind k; zero when unknown. A local process is
// found by its line before or after its start (p<n>.<session>, with or
// without its id).
func (o Origins) Of(k Kind, name string) origin.Origin {
	if got, ok := o[k][name]; ok || k != ProcessKind {
		return got
	}
	for n, got := range o[k] {
		if len(name) > len(n) && name[:len(n)] == n && name[len(n)] == '.' {
			return got
		}
	}
	return origin.Origin{}
}

func (o Origins) set(k Kind, name string, og origin.Origin) {
	if o[k] == nil {
		o[k] = map[string]origin.Origin{}
	}
	o[k][name] = og
}

// appendOrigin appends the origin of name to the file at path: one write,
// which O_APPEND lands whole.
func appendOrigin(path string, k Kind, name string, o origin.Origin) error {
	b, err := json.Marshal(originLine{Kind: k.String(), Name: name, Origin: o.Bounded()})
	if err != nil {
		return err
	}
	f, err := appendNoFollow(path)
	if err != nil {
		return err
	}
	_, werr := f.Write(append(b, '\n'))
	return errors.Join(werr, f.Close())
}

// ReadOrigins reads run's origins in cache: empty when there are none, or
// they cannot be read (what cannot be read is not told, never guessed).
func ReadOrigins(cache, run string) Origins {
	out := Origins{}
	if !ValidRunID(run) {
		return out
	}
	b, err := ReadFile(OriginsPath(cache, run), maxOrigins)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<10)
	for sc.Scan() {
		var l originLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Name == "" {
			continue
		}
		for _, k := range Kinds {
			if k.String() == l.Kind {
				out.set(k, l.Name, l.Origin.Bounded())
			}
		}
	}
	return out
}

// RemoveOrigins deletes run's origins in cache.
func RemoveOrigins(cache, run string) error {
	if !ValidRunID(run) {
		return fmt.Errorf("origins: %q is not a run id", run)
	}
	if err := os.Remove(OriginsPath(cache, run)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
