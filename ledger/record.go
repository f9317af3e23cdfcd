package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
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
	var raw struct {
		PID        *json.Number `json:"pid"`
		StartedISO *string      `json:"startedIso"`
		Backend    *string      `json:"backend"`
		MsbPath    *string      `json:"msbPath"`
		StartTicks *json.Number `json:"startTicks"`
		BootID     *string      `json:"bootId"`
		PidNS      *string      `json:"pidNamespace"`
		Endpoint   *string      `json:"endpoint"`
		Writer     *string      `json:"writer"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Record{}, fmt.Errorf("record is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, errors.New("record has data after its JSON object")
	}
	if raw.PID == nil {
		return Record{}, errors.New(`record has no "pid"`)
	}
	pid, err := raw.PID.Int64()
	if err != nil || pid <= 0 || pid > math.MaxInt32 {
		return Record{}, fmt.Errorf(`record "pid" %s is not a process id`, raw.PID.String())
	}
	if raw.Backend == nil || *raw.Backend == "" {
		return Record{}, errors.New(`record has no "backend"`)
	}
	r := Record{PID: int(pid), Backend: canonicalBackend(*raw.Backend)}
	if raw.StartedISO != nil {
		r.StartedISO = *raw.StartedISO
		if _, err := r.Started(); err != nil {
			return Record{}, err
		}
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	r.MsbPath, r.BootID, r.PidNamespace, r.Endpoint, r.Writer = str(raw.MsbPath), str(raw.BootID), str(raw.PidNS), str(raw.Endpoint), str(raw.Writer)
	if raw.StartTicks != nil {
		t, err := parseUint(raw.StartTicks.String())
		if err != nil {
			return Record{}, fmt.Errorf(`record "startTicks" %s: %w`, raw.StartTicks.String(), err)
		}
		r.StartTicks = t
	}
	return r, nil
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

func canonicalBackend(s string) string {
	if s == "microsandbox" {
		return "msb"
	}
	return s
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
