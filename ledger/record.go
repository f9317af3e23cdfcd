package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rightsize/rightsize-go/internal/names"
)

// Record is a run's record, runs/<run-id>.json. The first four fields are
// the family's; the rest are written by rightsize-go only and ignored by
// the other languages.
type Record struct {
	PID int `json:"pid"`
	// StartedISO is when the owning process started (not when the record
	// was written), in UTC. Other writers use whole seconds, milliseconds or
	// a variable fraction; the empty string means the writer could not tell.
	StartedISO string `json:"startedIso"`
	// Backend is "docker" or "msb"; "microsandbox" (Rust) is read as "msb".
	Backend string `json:"backend"`
	// MsbPath is the absolute path of the msb binary, for msb runs only.
	MsbPath string `json:"msbPath,omitempty"`

	// StartTicks is the owner's raw start time: clock ticks since boot on
	// Linux, microseconds since the epoch on macOS, 100 ns units since 1601
	// on Windows. Zero when unknown. Compared exactly, it defeats pid reuse
	// without a time window.
	StartTicks uint64 `json:"startTicks,omitempty"`
	// BootID identifies the boot the owner ran in.
	BootID string `json:"bootId,omitempty"`
	// PidNamespace identifies the pid namespace the pid belongs to (Linux).
	PidNamespace string `json:"pidNamespace,omitempty"`
	// Endpoint names the engine the run's sandboxes live on, such as
	// "unix:///var/run/docker.sock".
	Endpoint string `json:"endpoint,omitempty"`
	// Writer is "go" for records written by rightsize-go.
	Writer string `json:"writer,omitempty"`
}

// MaxRecordSize is the largest record file the ledger reads. Real records
// are well under 1 KiB.
const MaxRecordSize = 1 << 20

// ErrNoRecord means a run has line files but no record.
var ErrNoRecord = errors.New("no record file")

// ParseRecord reads a record in any of the family's formats: pretty-printed
// or compact, with or without a trailing newline, any startedIso precision
// or none. The backend comes back canonical ("microsandbox" becomes "msb").
// Unknown fields are ignored.
func ParseRecord(data []byte) (Record, error) {
	if len(data) > MaxRecordSize {
		return Record{}, fmt.Errorf("record is %d bytes, more than the %d a record can be", len(data), MaxRecordSize)
	}
	// Decoded field by field rather than into a struct: encoding/json
	// matches struct keys case-insensitively and lets a JSON string fill a
	// json.Number, so {"pid":"15899"} or {"PID":1,"pid":2} would be read
	// here differently from how the rest of the family reads them (exact
	// keys, a number for pid), and the sweep would judge another process.
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&fields); err != nil {
		return Record{}, fmt.Errorf("record is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, errors.New("record has data after its JSON object")
	}
	if fields == nil {
		return Record{}, errors.New(`record is null, not an object with a "pid"`)
	}
	pidText, ok := jsonNumber(fields["pid"])
	if !ok {
		if present(fields["pid"]) {
			return Record{}, fmt.Errorf(`record "pid" %s is not a process id`, clip(fields["pid"]))
		}
		return Record{}, errors.New(`record has no "pid"`)
	}
	pid, err := strconv.ParseInt(pidText, 10, 64)
	if err != nil || pid <= 0 || pid > math.MaxInt32 {
		return Record{}, fmt.Errorf(`record "pid" %s is not a process id`, pidText)
	}
	var r Record
	r.PID = int(pid)
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"startedIso", &r.StartedISO}, {"backend", &r.Backend}, {"msbPath", &r.MsbPath},
		{"bootId", &r.BootID}, {"pidNamespace", &r.PidNamespace}, {"endpoint", &r.Endpoint}, {"writer", &r.Writer},
	} {
		v := fields[f.key]
		if !present(v) {
			continue
		}
		if v[0] != '"' {
			return Record{}, fmt.Errorf("record %q is %s, not a string", f.key, clip(v))
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return Record{}, fmt.Errorf("record %q: %w", f.key, err)
		}
	}
	if r.Backend == "" {
		return Record{}, errors.New(`record has no "backend"`)
	}
	r.Backend = names.CanonicalBackend(r.Backend)
	if _, err := r.Started(); err != nil {
		return Record{}, err
	}
	if v := fields["startTicks"]; present(v) {
		text, ok := jsonNumber(v)
		if !ok {
			return Record{}, fmt.Errorf(`record "startTicks" %s is not a number`, clip(v))
		}
		t, err := parseUint(text)
		if err != nil {
			return Record{}, fmt.Errorf(`record "startTicks" %s: %w`, text, err)
		}
		r.StartTicks = t
	}
	return r, nil
}

// clip shortens a raw JSON value for an error message: a hostile record
// may put a megabyte, newlines or invalid UTF-8 there.
func clip(v json.RawMessage) string {
	s := string(v)
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	if !utf8.ValidString(s) || strings.ContainsAny(s, "\n\r\t") {
		return strconv.Quote(s)
	}
	return s
}

// present reports whether a field is there and not null.
func present(v json.RawMessage) bool {
	return len(v) > 0 && string(v) != "null"
}

// jsonNumber returns the text of v when it is a JSON number (the decoder
// has already checked its syntax), and false for anything else, a string
// holding digits included.
func jsonNumber(v json.RawMessage) (string, bool) {
	if !present(v) || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return "", false
	}
	return string(v), true
}

// Started parses StartedISO. The zero time (and no error) means the writer
// recorded no start time.
func (r Record) Started() (time.Time, error) {
	if r.StartedISO == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, r.StartedISO); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf(`record "startedIso" %q is not an ISO-8601 instant`, r.StartedISO)
}

// Marshal returns the record as the family writes it: compact JSON, the
// family's fields first in their order, msbPath only when set, then the
// Go fields, and a final newline.
func (r Record) Marshal() []byte {
	b, _ := json.Marshal(r) // a struct of strings and numbers cannot fail
	return append(b, '\n')
}

// FormatISO formats t as rightsize-go writes startedIso: UTC, milliseconds.
func FormatISO(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func parseUint(s string) (uint64, error) {
	var n uint64
	if s == "" {
		return 0, errors.New("empty")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, errors.New("not a non-negative integer")
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, errors.New("out of range")
		}
		n = n*10 + d
	}
	return n, nil
}
