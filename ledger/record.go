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

	"github.com/rightsize/rightsize-go/internal/isotime"
	"github.com/rightsize/rightsize-go/internal/names"
)

// A Record is a run's record, runs/<run-id>.json: who owns the run, and on
// which backend and engine its sandboxes live. The first four fields are the
// family's; the rest are written by rightsize-go only and ignored by the
// other languages. [ParseRecord] reads one as any member writes it,
// [Record.Marshal] writes one, and [Judge] says whether its owner lives.
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

// MaxRecordSize is the largest record [ParseRecord] reads. Real records
// are well under 1 KiB.
const MaxRecordSize = 1 << 20

// ParseRecord reads a record in any of the family's formats: pretty-printed
// or compact, with or without a trailing newline, any startedIso precision
// or none. The backend comes back canonical ("microsandbox" becomes "msb").
// Unknown fields are ignored. A corrupt record is an error that says why,
// never a panic.
func ParseRecord(data []byte) (Record, error) {
	if len(data) > MaxRecordSize {
		return Record{}, fmt.Errorf("record is %d bytes, more than the %d a record can be", len(data), MaxRecordSize)
	}
	var f recordFields
	if !f.scanPlain(data) {
		if err := f.decode(data); err != nil {
			return Record{}, err
		}
	}
	pidText, ok := jsonNumber(f[fieldPID])
	if !ok {
		if present(f[fieldPID]) {
			return Record{}, fmt.Errorf(`record "pid" %s is not a process id`, clip(f[fieldPID]))
		}
		return Record{}, errors.New(`record has no "pid"`)
	}
	pid, err := strconv.ParseInt(pidText, 10, 64)
	if err != nil || pid <= 0 || pid > math.MaxInt32 {
		return Record{}, fmt.Errorf(`record "pid" %s is not a process id`, pidText)
	}
	var r Record
	r.PID = int(pid)
	strs := [len(recordKeys)]*string{
		fieldStartedISO: &r.StartedISO, fieldBackend: &r.Backend, fieldMsbPath: &r.MsbPath, fieldBootID: &r.BootID,
		fieldPidNamespace: &r.PidNamespace, fieldEndpoint: &r.Endpoint, fieldWriter: &r.Writer,
	}
	for i, dst := range strs {
		v := f[i]
		if dst == nil || !present(v) {
			continue
		}
		if v[0] != '"' {
			return Record{}, fmt.Errorf("record %q is %s, not a string", recordKeys[i], clip(v))
		}
		if err := unquote(v, dst); err != nil {
			return Record{}, fmt.Errorf("record %q: %w", recordKeys[i], err)
		}
	}
	if r.Backend == "" {
		return Record{}, errors.New(`record has no "backend"`)
	}
	r.Backend = names.CanonicalBackend(r.Backend)
	if _, err := r.Started(); err != nil {
		return Record{}, err
	}
	if v := f[fieldStartTicks]; present(v) {
		text, ok := jsonNumber(v)
		if !ok {
			return Record{}, fmt.Errorf(`record "startTicks" %s is not a number`, clip(v))
		}
		t, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			// The *strconv.NumError would repeat the text; its cause
			// (invalid syntax, out of range) is what is left to say.
			return Record{}, fmt.Errorf(`record "startTicks" %s is not a count of ticks: %w`, clip(v), errors.Unwrap(err))
		}
		r.StartTicks = t
	}
	return r, nil
}

// recordKeys are the keys a record's reader knows, in the order of
// recordFields; every other key is ignored.
var recordKeys = [...]string{"pid", "startTicks", "startedIso", "backend", "msbPath", "bootId", "pidNamespace", "endpoint", "writer"}

// Indexes of recordKeys: two numbers, then strings.
const (
	fieldPID = iota
	fieldStartTicks
	fieldStartedISO
	fieldBackend
	fieldMsbPath
	fieldBootID
	fieldPidNamespace
	fieldEndpoint
	fieldWriter
)

// recordFields are the raw JSON values of recordKeys, nil for a key that
// is absent.
type recordFields [len(recordKeys)]json.RawMessage

func (f *recordFields) set(key []byte, v json.RawMessage) {
	for i, k := range recordKeys {
		if string(key) == k {
			f[i] = v
			return
		}
	}
}

// decode reads any record, with encoding/json.
func (f *recordFields) decode(data []byte) error {
	// Decoded field by field rather than into a struct: encoding/json
	// matches struct keys case-insensitively and lets a JSON string fill a
	// json.Number, so {"pid":"15899"} or {"PID":1,"pid":2} would be read
	// here differently from how the rest of the family reads them (exact
	// keys, a number for pid), and the sweep would judge another process.
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&fields); err != nil {
		return fmt.Errorf("record is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("record has data after its JSON object")
	}
	if fields == nil {
		return errors.New(`record is null, not an object with a "pid"`)
	}
	for k, v := range fields {
		f.set([]byte(k), v)
	}
	return nil
}

// scanPlain reads the records every member writes, in a fraction of
// decode's time (a sweep of a large ledger reads hundreds of thousands):
// one JSON object whose keys and values are strings of printable ASCII
// without escapes, integers or null. It reports false, having set
// nothing that matters, for anything else, which decode then reads: what
// both accept, they read alike (the later of two equal keys wins, as in a
// decoded map), and every error comes from decode.
func (f *recordFields) scanPlain(data []byte) bool {
	var got recordFields
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			key, j, ok := plainString(data, i)
			if !ok {
				return false
			}
			i = skipSpace(data, j)
			if i == len(data) || data[i] != ':' {
				return false
			}
			i = skipSpace(data, i+1)
			var v []byte
			if v, i, ok = plainValue(data, i); !ok {
				return false
			}
			got.set(key[1:len(key)-1], v)
			i = skipSpace(data, i)
			if i == len(data) {
				return false
			}
			if data[i] == '}' {
				i++
				break
			}
			if data[i] != ',' {
				return false
			}
			i = skipSpace(data, i+1)
		}
	}
	if skipSpace(data, i) != len(data) {
		return false
	}
	*f = got
	return true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t') {
		i++
	}
	return i
}

// plainString is the string starting at data[i], quotes included, when it
// holds printable ASCII only and no escape; end is the index after it.
func plainString(data []byte, i int) (s []byte, end int, ok bool) {
	if i == len(data) || data[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i : j+1], j + 1, true
		case c == '\\' || c < 0x20 || c > 0x7e:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// plainValue is the value starting at data[i] when it is a plain string,
// an integer in JSON's syntax (no fraction, no exponent), or null.
func plainValue(data []byte, i int) (v []byte, end int, ok bool) {
	if i == len(data) {
		return nil, 0, false
	}
	switch c := data[i]; {
	case c == '"':
		return plainString(data, i)
	case c == 'n':
		if len(data)-i >= 4 && string(data[i:i+4]) == "null" {
			return data[i : i+4], i + 4, true
		}
		return nil, 0, false
	case c == '-' || isDigit(c):
		j := i
		if c == '-' {
			j++
		}
		switch {
		case j == len(data) || !isDigit(data[j]):
			return nil, 0, false
		case data[j] == '0':
			j++
		default:
			for j < len(data) && isDigit(data[j]) {
				j++
			}
		}
		// What follows a number must end it: a fraction, an exponent or a
		// stray digit (a leading zero) is decode's to read or refuse.
		if j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E' || isDigit(data[j])) {
			return nil, 0, false
		}
		return data[i:j], j, true
	}
	return nil, 0, false
}

// unquote sets *dst to the JSON string v. A string of printable ASCII
// without escapes is its bytes between the quotes; any other goes
// through encoding/json.
func unquote(v json.RawMessage, dst *string) error {
	if len(v) >= 2 && v[len(v)-1] == '"' {
		inner := v[1 : len(v)-1]
		plain := true
		for _, c := range inner {
			if c == '\\' || c == '"' || c < 0x20 || c > 0x7e {
				plain = false
				break
			}
		}
		if plain {
			*dst = string(inner)
			return nil
		}
	}
	return json.Unmarshal(v, dst)
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

// Started parses StartedISO. The zero time (and no error) means the start
// is unknown: the writer recorded none, or recorded the epoch itself, which
// is what the Kotlin member writes when the JVM cannot read its own start
// (in any precision or offset). Every ISO-8601 instant a member of the
// family writes is read: whole seconds or any fraction, 'Z' or an offset.
func (r Record) Started() (time.Time, error) {
	if r.StartedISO == "" {
		return time.Time{}, nil
	}
	t, err := isotime.Parse(r.StartedISO)
	if err != nil {
		return time.Time{}, fmt.Errorf(`record "startedIso" %q is not an ISO-8601 instant: %v`, clipString(r.StartedISO), err)
	}
	if t.Equal(unixEpoch) {
		return time.Time{}, nil
	}
	return t, nil
}

// unixEpoch is Kotlin's "unknown" start (Instant.EPOCH).
var unixEpoch = time.Unix(0, 0)

func clipString(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Marshal returns the record as the family writes it: compact JSON, the
// family's fields first in their order, msbPath only when set, then the
// Go fields, and a final newline.
func (r Record) Marshal() []byte {
	b, _ := json.Marshal(r) // a struct of strings and numbers cannot fail
	return append(b, '\n')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
