package capbuf

import (
	"strings"
	"testing"
)

func TestHeadKeepsTheFirstBytesAndCountsTheRest(t *testing.T) {
	h := New(5)
	for _, s := range []string{"abc", "def", "ghi"} {
		if n, err := h.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; a capped writer must never fail or block the stream", s, n, err)
		}
	}
	if string(h.Bytes()) != "abcde" || !h.Truncated() || h.Dropped() != 4 {
		t.Errorf("kept %q, truncated %v, dropped %d; want \"abcde\", true, 4", h.Bytes(), h.Truncated(), h.Dropped())
	}
	if got := h.String(); !strings.HasPrefix(got, "abcde\n") || !strings.Contains(got, "4 more bytes dropped") {
		t.Errorf("String() = %q; want the kept bytes and a note of the 4 dropped", got)
	}
}

func TestHeadExactlyFullIsNotTruncated(t *testing.T) {
	h := New(3)
	_, _ = h.Write([]byte("abc"))
	if h.Truncated() || h.String() != "abc" {
		t.Errorf("a write that exactly fills the buffer: truncated %v, String %q", h.Truncated(), h.String())
	}
	_, _ = h.Write(nil)
	if h.Truncated() {
		t.Error("an empty write into a full buffer marked it truncated")
	}
}

func TestZeroHeadKeepsNothing(t *testing.T) {
	var h Head
	if n, err := h.Write([]byte("x")); n != 1 || err != nil || len(h.Bytes()) != 0 || h.Dropped() != 1 {
		t.Errorf("zero Head: Write = %d, %v; kept %q, dropped %d", n, err, h.Bytes(), h.Dropped())
	}
}
