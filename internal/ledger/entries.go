package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"

	"github.com/rightsize/rightsize-go/internal/names"
)

// The entries file, runs/<id>.jsonl, is how the systemf member
// (@systemfsoftware/rightsize) lists a run's sandboxes and networks, in
// place of the two line files: one JSON object a line, written whole by a
// temporary file and a rename (its lifecycle/hygiene/ledger.ts):
//
//	{"kind":"sandbox","backend":"docker","name":"rz-<run>-<n>"}
//	{"kind":"sandbox","backend":"docker","name":"rz-<run>-<n>","id":"<engine id>"}
//	{"kind":"network","id":"rz-net-<8 hex>"}
//
// Its own reader skips a line it cannot parse, never trusting it; so does
// this one (Rejected). A well-formed line of a kind this reader does not
// know is another matter: a later version of that member may act on it,
// so it is kept, and so is the run's record (EntryFile.Foreign).

// EntryFile is what an entries file holds.
type EntryFile struct {
	// Sandboxes and Networks are the valid names, in order, each once.
	Sandboxes []string
	Networks  []string
	// Rejected are the first MaxRejectedKept lines that name nothing
	// valid; RejectedCount counts them all.
	Rejected      []Rejected
	RejectedCount int
	// Foreign counts the well-formed lines of a kind not known here.
	Foreign int
}

// entry is one line of an entries file as its writer makes it.
type entry struct {
	Kind    *string `json:"kind"`
	Backend *string `json:"backend"`
	Name    *string `json:"name"`
	ID      *string `json:"id"`
}

// What a line of an entries file is.
const (
	entryBlank = iota
	entrySandbox
	entryNetwork
	entryForeign
	entryRejected
)

// parseEntry says what line is, and the name it gives.
func parseEntry(line []byte) (what int, name string) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return entryBlank, ""
	}
	var e entry
	if line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Kind == nil {
		return entryRejected, ""
	}
	switch *e.Kind {
	case "sandbox":
		// As its writer's own parser: a backend it knows, a name that can
		// be handed to an engine.
		if e.Name == nil || e.Backend == nil || names.CanonicalBackend(*e.Backend) != "docker" && names.CanonicalBackend(*e.Backend) != "msb" || !ValidName(*e.Name) {
			return entryRejected, ""
		}
		return entrySandbox, *e.Name
	case "network":
		// Its writer makes networks rz-net-<8 hex> and reads no other.
		if e.ID == nil || !names.FamilyNetwork(*e.ID) {
			return entryRejected, ""
		}
		return entryNetwork, *e.ID
	}
	return entryForeign, ""
}

// ReadEntries reads an entries file as ReadLines reads a line file: a
// missing file is empty, a symbolic link is not followed, and a file past
// MaxLineFileSize or MaxLines is an error wrapping ErrOversized.
func ReadEntries(path string) (EntryFile, error) {
	var ef EntryFile
	lines, err := entryLines(path)
	if err != nil {
		return ef, err
	}
	seen := map[string]bool{}
	for i, line := range lines {
		what, name := parseEntry(line)
		switch what {
		case entrySandbox, entryNetwork:
			key := strconv.Itoa(what) + name
			if seen[key] {
				continue
			}
			seen[key] = true
			if what == entrySandbox {
				ef.Sandboxes = append(ef.Sandboxes, name)
			} else {
				ef.Networks = append(ef.Networks, name)
			}
		case entryForeign:
			ef.Foreign++
		case entryRejected:
			ef.RejectedCount++
			if len(ef.Rejected) < MaxRejectedKept {
				ef.Rejected = append(ef.Rejected, rejectedLine(baseName(path), i+1, line))
			}
		}
	}
	return ef, nil
}

// RewriteEntries rewrites an entries file, atomically, with the lines that
// name a sandbox or network keep keeps, and every line of a kind not known
// here; lines that name nothing valid go. With no line left, the file is
// removed.
func RewriteEntries(path string, keep func(k Kind, name string) bool) error {
	lines, err := entryLines(path)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	for _, line := range lines {
		what, name := parseEntry(line)
		switch {
		case what == entryForeign,
			what == entrySandbox && keep(SandboxKind, name),
			what == entryNetwork && keep(NetworkKind, name):
			out.Write(bytes.TrimSpace(line))
			out.WriteByte('\n')
		}
	}
	if out.Len() == 0 {
		return removeIfExists(path)
	}
	return writeAtomic(path, out.Bytes())
}

// entryLines reads the lines of an entries file, within the bounds of a
// line file.
func entryLines(path string) ([][]byte, error) {
	f, err := openNoFollow(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxLineFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("entries file %s: %w", path, err)
	}
	lines := bytes.Split(data, []byte{'\n'})
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if len(data) > MaxLineFileSize || len(lines) > MaxLines {
		return nil, fmt.Errorf("entries file %s: more than %d lines or %d bytes: %w, not read", path, MaxLines, MaxLineFileSize, ErrOversized)
	}
	return lines, nil
}

// rejectedLine reports line n of file, quoted, as readLines does.
func rejectedLine(file string, n int, line []byte) Rejected {
	head := line
	if len(head) > excerptLen {
		head = head[:excerptLen]
	}
	q := strconv.Quote(string(head))
	if len(line) > excerptLen {
		q += "…"
	}
	return Rejected{File: file, Line: n, Excerpt: q, Length: len(line)}
}
