package ledger

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A ReuseIdentity is what makes two keep-alive sandboxes the same one: its
// image, environment, command, ports, memory limit and files. Every member
// of the family hashes it alike ([ReuseIdentity.Hash]) and names the
// sandbox after the hash ([ReuseName]), so a sandbox one member keeps alive
// is found again by any other.
type ReuseIdentity struct {
	// Image is the image as the spec names it ("redis:7-alpine").
	Image string
	// Env is the sandbox's environment, without the engine's own.
	Env map[string]string
	// Command is what the sandbox runs; empty for the image's own.
	Command []string
	// ExposedPorts as "6379", "6379/tcp" (both hash as the number 6379 in
	// exposedPorts), "53/udp" (the number 53 in exposedUdpPorts, as the
	// Rust member hashes it) or anything else (hashed as that string).
	ExposedPorts  []string
	MemoryLimitMB int // 0: no limit
	Copies        []ReuseCopy
}

// A ReuseCopy is a file copied into a keep-alive sandbox: where it lands, and
// the hash of its content.
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

// Hash is the hex sha256 of [ReuseIdentity.CanonicalJSON]: 64 lowercase
// hex digits.
func (r ReuseIdentity) Hash() string {
	sum := sha256.Sum256(r.CanonicalJSON())
	return hex.EncodeToString(sum[:])
}

// ReuseName is the keep-alive sandbox's name for a hash
// ([ReuseIdentity.Hash]): "rz-reuse-" and its first 12 hex characters.
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
