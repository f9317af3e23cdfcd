package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ReuseIdentity is what makes two keep-alive sandboxes the same one, as the
// whole family hashes it (contract §8).
type ReuseIdentity struct {
	Image   string
	Env     map[string]string
	Command []string
	// ExposedPorts as "6379", "6379/tcp" (both hash as the number 6379) or
	// "53/udp" (hashed as that string).
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
// (sorted by guestPath); no HTML escaping.
func (r ReuseIdentity) CanonicalJSON() []byte {
	var b bytes.Buffer
	b.WriteString(`{"image":`)
	writeJSONString(&b, r.Image)
	b.WriteString(`,"env":{`)
	keys := make([]string, 0, len(r.Env))
	for k := range r.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
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
	b.WriteString(`],"exposedPorts":[`)
	for i, p := range sortedPorts(r.ExposedPorts) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p)
	}
	b.WriteString(`],"memoryLimitMb":`)
	if r.MemoryLimitMB > 0 {
		b.WriteString(strconv.Itoa(r.MemoryLimitMB))
	} else {
		b.WriteString("null")
	}
	b.WriteString(`,"copies":[`)
	copies := append([]ReuseCopy(nil), r.Copies...)
	sort.Slice(copies, func(i, j int) bool { return copies[i].GuestPath < copies[j].GuestPath })
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
	b.WriteString("]}")
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

// sortedPorts renders ports as JSON values: tcp ports as numbers, in
// numeric order, then other protocols as strings.
func sortedPorts(ports []string) []string {
	var nums []int
	var other []string
	for _, p := range ports {
		num, proto, _ := strings.Cut(p, "/")
		if n, err := strconv.Atoi(num); err == nil && (proto == "" || proto == "tcp") {
			nums = append(nums, n)
			continue
		}
		other = append(other, p)
	}
	sort.Ints(nums)
	sort.Strings(other)
	out := make([]string, 0, len(ports))
	for _, n := range nums {
		out = append(out, strconv.Itoa(n))
	}
	for _, s := range other {
		var b bytes.Buffer
		writeJSONString(&b, s)
		out = append(out, b.String())
	}
	return out
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}

// ReuseEntry is the keep-alive registry entry, reuse/<hash>.json.
type ReuseEntry struct {
	Name  string            `json:"name"`
	Image string            `json:"image"`
	Ports map[string]string `json:"ports"` // guest port → host port
	// CreatedISO is when the sandbox was created.
	CreatedISO string `json:"createdIso"`
	Backend    string `json:"backend"`
}

// WriteReuseEntry writes reuse/<hash>.json atomically.
func WriteReuseEntry(cache, hash string, e ReuseEntry) error {
	dir, err := EnsureSubdir(cache, ReuseDir)
	if err != nil {
		return err
	}
	if e.CreatedISO == "" {
		e.CreatedISO = FormatISO(time.Now())
	}
	if e.Ports == nil {
		e.Ports = map[string]string{}
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("reuse entry %s: %w", hash, err)
	}
	return writeAtomic(filepath.Join(dir, hash+".json"), append(data, '\n'))
}

// ReadReuseEntry reads reuse/<hash>.json.
func ReadReuseEntry(cache, hash string) (ReuseEntry, error) {
	f, err := openNoFollow(filepath.Join(cache, ReuseDir, hash+".json"))
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
	var e ReuseEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return ReuseEntry{}, fmt.Errorf("reuse entry %s: %w", hash, err)
	}
	return e, nil
}
