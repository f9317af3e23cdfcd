package memory

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
)

// The journal's operations.
const (
	opCreate = "create"
	opRemove = "remove"
)

// Entry is one line of the journal EnvJournal names: which process made
// or removed which object, and when. A line is written, under the folder's
// lock, before the object's file is written or removed: a removal killed
// half-way has its line, and nothing is removed without one.
type Entry struct {
	Op        string    `json:"op"` // "create" or "remove"
	At        time.Time `json:"at"`
	PID       int       `json:"pid"`
	Kind      string    `json:"kind"` // "sandbox" or "network"
	Name      string    `json:"name"`
	ID        string    `json:"id"`
	Run       string    `json:"run,omitempty"`
	KeepAlive string    `json:"keepAlive,omitempty"`
}

// Removal reports whether e is a removal.
func (e Entry) Removal() bool { return e.Op == opRemove }

// maxEntry bounds one journal line as a reader takes it.
const maxEntry = 4 << 10

// log appends the line of op on o, when a journal is asked for. One
// write of a short line with O_APPEND: lines of several processes never
// mix.
func (d *driver) log(op string, k backend.Kind, o object) error {
	if d.journal == "" {
		return nil
	}
	b, err := json.Marshal(Entry{Op: op, At: time.Now().UTC(), PID: os.Getpid(), Kind: k.String(), Name: o.Name, ID: o.ID, Run: o.Run, KeepAlive: o.KeepAlive})
	if err != nil {
		return err
	}
	f, err := ledger.OpenFile(d.journal, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("memory backend: journal: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("memory backend: journal %s: %w", d.journal, err)
	}
	return nil
}

// parseEntry is the entry line holds, when it holds one.
func parseEntry(line []byte) (Entry, bool) {
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil || e.Op != opCreate && e.Op != opRemove {
		return Entry{}, false
	}
	return e, true
}

// ReadJournal reads the journal r from its start, calling fn with each
// whole line's entry; it returns how many bytes it consumed, so that a
// reader following a journal another process writes can go on from
// there (a line not yet ended is left for the next read). A piece of a
// line its writer was killed in the middle of is skipped; any other line
// that is not an entry is an error.
func ReadJournal(r io.Reader, fn func(Entry)) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var n int64
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull || len(line) > maxEntry {
			return n, fmt.Errorf("memory journal: a line at byte %d is longer than %d bytes", n, maxEntry)
		}
		if err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		e, ok := parseEntry(line)
		if !ok {
			// A writer killed in the middle of its line (a SIGKILL can
			// cut a write where it crosses a page of the file) leaves
			// a piece the next writer's line follows: the piece is an
			// operation never made (each is journalled before it is
			// made), and the line after it is whole.
			if i := bytes.LastIndex(line, []byte(`{"op":`)); i > 0 {
				e, ok = parseEntry(line[i:])
			}
		}
		if !ok {
			return n, fmt.Errorf("memory journal: the line at byte %d is not an entry: %q", n, line)
		}
		n += int64(len(line))
		fn(e)
	}
}
