package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/names"
)

// ReuseEntry is the keep-alive registry entry, reuse/<hash>.json, in the
// family's format: Rust, Kotlin and Node write and read the same fields,
// ports keyed by the bare guest port with the host port as a number. The
// last two fields are rightsize-go's own; the others ignore them.
type ReuseEntry struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// Ports maps a tcp guest port ("6379") to its host port (32801).
	Ports map[string]int `json:"ports"`
	// UDPPorts is the same for udp ports; omitted when empty.
	UDPPorts map[string]int `json:"udpPorts,omitempty"`
	// CreatedISO is when the sandbox was created.
	CreatedISO string `json:"createdIso"`
	Backend    string `json:"backend"`
	// ImageID is the engine's id of the image the sandbox was created from.
	ImageID string `json:"imageId,omitempty"`
	Writer  string `json:"writer,omitempty"`
}

// PortKey splits a port as a Spec gives it ("8080/tcp", "8080", "53/udp")
// into the registry's key ("8080") and whether it is udp.
func PortKey(port string) (key string, udp bool) {
	num, proto, _ := strings.Cut(port, "/")
	return num, strings.EqualFold(proto, "udp")
}

// ReusePath is the path of hash's registry entry in cache.
func ReusePath(cache, hash string) string { return filepath.Join(cache, ReuseDir, hash+".json") }

// WriteReuseEntry writes reuse/<hash>.json atomically.
func WriteReuseEntry(cache, hash string, e ReuseEntry) error {
	if !validHash(hash) {
		return fmt.Errorf("reuse entry: %q is not a keep-alive hash", hash)
	}
	if _, err := EnsureSubdir(cache, ReuseDir); err != nil {
		return err
	}
	if e.CreatedISO == "" {
		e.CreatedISO = FormatISO(time.Now())
	}
	if e.Ports == nil {
		e.Ports = map[string]int{}
	}
	if e.Writer == "" {
		e.Writer = "go"
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("reuse entry %s: %w", hash, err)
	}
	return writeAtomic(ReusePath(cache, hash), append(data, '\n'))
}

// ReadReuseEntry reads reuse/<hash>.json, written by any member, or by
// rightsize-go before it wrote the family's format ("8080/tcp":"32801").
func ReadReuseEntry(cache, hash string) (ReuseEntry, error) {
	if !validHash(hash) {
		return ReuseEntry{}, fmt.Errorf("reuse entry: %q is not a keep-alive hash", hash)
	}
	f, err := openNoATime(ReusePath(cache, hash))
	if err != nil {
		return ReuseEntry{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxRecordSize+1))
	if err != nil {
		return ReuseEntry{}, err
	}
	if len(data) > MaxRecordSize {
		return ReuseEntry{}, errors.New("reuse entry larger than 1 MiB")
	}
	return ParseReuseEntry(data)
}

// ParseReuseEntry reads a registry entry's content.
func ParseReuseEntry(data []byte) (ReuseEntry, error) {
	var raw struct {
		Name       *string                    `json:"name"`
		Image      *string                    `json:"image"`
		Ports      map[string]json.RawMessage `json:"ports"`
		UDPPorts   map[string]json.RawMessage `json:"udpPorts"`
		CreatedISO *string                    `json:"createdIso"`
		Backend    *string                    `json:"backend"`
		ImageID    string                     `json:"imageId"`
		Writer     string                     `json:"writer"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return ReuseEntry{}, fmt.Errorf("reuse entry: %w", err)
	}
	if raw.Name == nil || raw.Image == nil || raw.CreatedISO == nil || raw.Backend == nil || raw.Ports == nil {
		return ReuseEntry{}, errors.New(`reuse entry: want "name", "image", "ports", "createdIso" and "backend"`)
	}
	e := ReuseEntry{Name: *raw.Name, Image: *raw.Image, CreatedISO: *raw.CreatedISO, Backend: names.CanonicalBackend(*raw.Backend),
		ImageID: raw.ImageID, Writer: raw.Writer, Ports: map[string]int{}}
	for _, src := range []struct {
		m   map[string]json.RawMessage
		udp bool
	}{{raw.Ports, false}, {raw.UDPPorts, true}} {
		for k, v := range src.m {
			key, udp := PortKey(k)
			if _, err := strconv.Atoi(key); err != nil {
				return ReuseEntry{}, fmt.Errorf("reuse entry: port %q is not a number", k)
			}
			host, err := portNumber(v)
			if err != nil {
				return ReuseEntry{}, fmt.Errorf("reuse entry: port %q: %w", k, err)
			}
			if udp || src.udp {
				if e.UDPPorts == nil {
					e.UDPPorts = map[string]int{}
				}
				e.UDPPorts[key] = host
			} else {
				e.Ports[key] = host
			}
		}
	}
	return e, nil
}

// portNumber reads a host port: a JSON number, or (rightsize-go before the
// family's format) a string of digits.
func portNumber(v json.RawMessage) (int, error) {
	var n int
	if err := json.Unmarshal(v, &n); err == nil {
		if n <= 0 || n > 65535 {
			return 0, fmt.Errorf("host port %d out of range", n)
		}
		return n, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return 0, fmt.Errorf("host port %q is neither a number nor a string", clipString(string(v)))
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 65535 {
		return 0, fmt.Errorf("host port %q is not a port", s)
	}
	return n, nil
}

// RemoveReuseEntry deletes reuse/<hash>.json; a missing one is no error.
func RemoveReuseEntry(cache, hash string) error {
	if !validHash(hash) {
		return fmt.Errorf("reuse entry: %q is not a keep-alive hash", hash)
	}
	return removeIfExists(ReusePath(cache, hash))
}

// ReuseHashes lists the hashes of the registry's entries.
func ReuseHashes(cache string) ([]string, error) {
	dir := filepath.Join(cache, ReuseDir)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err := CheckPrivate(dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if h, ok := strings.CutSuffix(e.Name(), ".json"); ok && validHash(h) && e.Type().IsRegular() {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out, nil
}

// validHash: 64 lowercase hex digits, the sha256 every member names an
// entry by.
func validHash(h string) bool {
	return len(h) == 64 && names.LowerHex(h)
}
