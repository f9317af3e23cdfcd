// Package capbuf holds the bounded output buffer the backends give to the
// commands they run: it keeps the first bytes a command writes, counts the
// rest, and never fails or blocks a write, so a chatty command can neither
// exhaust memory nor stall on a full pipe.
//
// It imports nothing of the module.
package capbuf

import (
	"bytes"
	"fmt"
)

// Head keeps the first Limit bytes written to it and counts the rest. Its
// zero value keeps nothing. One writer at a time.
type Head struct {
	limit   int
	buf     bytes.Buffer
	dropped int
}

// New returns a Head that keeps up to limit bytes.
func New(limit int) *Head { return &Head{limit: limit} }

// Write keeps what fits and counts the rest; it always reports all of p
// written.
func (h *Head) Write(p []byte) (int, error) {
	room := max(h.limit-h.buf.Len(), 0)
	if room >= len(p) {
		h.buf.Write(p)
		return len(p), nil
	}
	h.buf.Write(p[:room])
	h.dropped += len(p) - room
	return len(p), nil
}

// Bytes returns what was kept.
func (h *Head) Bytes() []byte { return h.buf.Bytes() }

// Dropped returns how many bytes did not fit.
func (h *Head) Dropped() int { return h.dropped }

// Truncated reports whether any byte did not fit.
func (h *Head) Truncated() bool { return h.dropped > 0 }

// String returns what was kept, followed, when something did not fit, by a
// line saying how much was dropped.
func (h *Head) String() string {
	if h.dropped == 0 {
		return h.buf.String()
	}
	return h.buf.String() + fmt.Sprintf("\n[…%d more bytes dropped]", h.dropped)
}
