package ledger

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rightsize/rightsize-go/internal/names"
)

// ReuseIdentity is what makes two keep-alive sandboxes the same one, as the
// whole family hashes it (contract §8).
type ReuseIdentity struct {
	Image   string
	Env     map[string]string
	Command []string
	// ExposedPorts as "6379", "6379/tcp" (both hash as the number 6379 in
	// exposedPorts), "53/udp" (the number 53 in exposedUdpPorts, as the
	// Rust member hashes it) or anything else (hashed as that string).
	ExposedPorts  []string
	MemoryLimitMB int // 0: no limit
	Copies        []ReuseCopy
}

// ReuseCopy is a file copied into a keep-alive sandbox.
type ReuseCopy struct {
	GuestPath string
	SHA256    string // hex of the content's sha256
}

// CanonicalJSON is the family's canonical form: no whitespace; keys image,
// env (sorted), command, exposedPorts (sorted), memoryLimitMb, copies
// (sorted by guestPath), then exposedUdpPorts (sorted) only when there are
// any. Where the members disagree, Go follows the majority: strings are
// escaped as JSON.stringify and serde_json do (\b, \f; U+2028 and U+2029
// raw), not as Kotlin does (\u0008); keys are sorted by UTF-16 code units,
// as Node and Kotlin do, not by bytes as Rust does.
func (r ReuseIdentity) CanonicalJSON() []byte {
	var b bytes.Buffer
	b.WriteString(`{"image":`)
	writeJSONString(&b, r.Image)
	b.WriteString(`,"env":{`)
	keys := make([]string, 0, len(r.Env))
	for k := range r.Env {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUTF16)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, k)
		b.WriteByte(':')
		writeJSONString(&b, r.Env[k])
	}
	b.WriteString(`},"command":[`)
	for i, c := range r.Command {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, c)
	}
	tcp, udp := sortedPorts(r.ExposedPorts)
	b.WriteString(`],"exposedPorts":[`)
	b.WriteString(strings.Join(tcp, ","))
	b.WriteString(`],"memoryLimitMb":`)
	if r.MemoryLimitMB > 0 {
		b.WriteString(strconv.Itoa(r.MemoryLimitMB))
	} else {
		b.WriteString("null")
	}
	b.WriteString(`,"copies":[`)
	copies := slices.Clone(r.Copies)
	slices.SortStableFunc(copies, func(a, b ReuseCopy) int { return compareUTF16(a.GuestPath, b.GuestPath) })
	for i, c := range copies {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"guestPath":`)
		writeJSONString(&b, c.GuestPath)
		b.WriteString(`,"sha256":`)
		writeJSONString(&b, c.SHA256)
		b.WriteByte('}')
	}
	b.WriteByte(']')
	if len(udp) > 0 {
		b.WriteString(`,"exposedUdpPorts":[`)
		b.WriteString(strings.Join(udp, ","))
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.Bytes()
}

// Hash is the hex sha256 of CanonicalJSON.
func (r ReuseIdentity) Hash() string {
	sum := sha256.Sum256(r.CanonicalJSON())
	return hex.EncodeToString(sum[:])
}

// ReuseName is the keep-alive sandbox's name for a hash: "rz-reuse-" and
// the first 12 hex characters.
func ReuseName(hash string) string { return "rz-reuse-" + hash[:min(12, len(hash))] }

// sortedPorts renders ports as JSON values: tcp ports as numbers in
// numeric order, then ports of a protocol no member hashes (and ranges) as
// strings, sorted; and, apart, udp ports as numbers in numeric order.
func sortedPorts(ports []string) (tcp, udp []string) {
	var nums, udps []int
	var other []string
	for _, p := range ports {
		num, proto, _ := strings.Cut(p, "/")
		n, err := strconv.Atoi(num)
		switch {
		case err == nil && (proto == "" || proto == "tcp"):
			nums = append(nums, n)
		case err == nil && strings.EqualFold(proto, "udp"):
			udps = append(udps, n)
		default:
			other = append(other, p)
		}
	}
	slices.Sort(nums)
	slices.Sort(udps)
	slices.Sort(other)
	for _, n := range nums {
		tcp = append(tcp, strconv.Itoa(n))
	}
	for _, s := range other {
		var b bytes.Buffer
		writeJSONString(&b, s)
		tcp = append(tcp, b.String())
	}
	for _, n := range udps {
		udp = append(udp, strconv.Itoa(n))
	}
	return tcp, udp
}

// writeJSONString writes s as a JSON string the way JSON.stringify and
// serde_json do: '"' and '\\' escaped, \b \f \n \r \t by name, every
// other control character as \u00xx (lowercase), everything else as it is.
// (encoding/json escapes U+2028 and U+2029 too, which no member does.)
// Invalid UTF-8 is written as U+FFFD, as a Java or JavaScript string of
// those bytes would hold it.
func writeJSONString(b *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	for _, c := range s { // an invalid byte is U+FFFD
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
				continue
			}
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
}

// compareUTF16 orders strings by their UTF-16 code units, as JavaScript's
// < and Java's compareTo do: it differs from byte order only where a
// character above U+FFFF (a surrogate pair, 0xD800-0xDBFF first) meets one
// from U+E000 to U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmp.Compare(utf16Units(ra), utf16Units(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// utf16Units is r's UTF-16 code units as one number, the first one high:
// ordered as the units are.
func utf16Units(r rune) int64 {
	if r > 0xFFFF {
		r -= 0x10000
		return int64(0xD800+r>>10)<<16 | int64(0xDC00+r&0x3FF)
	}
	return int64(r) << 16
}

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
		return 0, fmt.Errorf("host port %s is neither a number nor a string", clip(v))
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
