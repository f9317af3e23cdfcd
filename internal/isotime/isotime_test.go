package isotime_test

import (
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/isotime"
)

// Every ISO-8601 instant a member of the family, or the platform it runs
// on, may write for startedIso. A layout the reader does not know once made
// a live owner's record "unreadable" and, after an hour, reaped.
func TestParse(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	for _, tc := range []struct {
		in, want string // want "" when it must be refused
		reason   string
	}{
		{"2026-11-29T20:30:38Z", "2026-11-29T20:30:38Z", "Rust: whole seconds"},
		{"2026-11-29T20:36:06.950Z", "2026-11-29T20:36:06.95Z", "Node: milliseconds"},
		{"2026-11-29T20:31:02.5Z", "2026-11-29T20:31:02.5Z", "Kotlin: a variable fraction"},
		{"2026-11-29T20:31:02.123456789Z", "2026-11-29T20:31:02.123456789Z", "Kotlin: nanoseconds"},
		{"2026-11-29T20:31:02.1234567891234Z", "2026-11-29T20:31:02.123456789Z", "more digits than nanoseconds: the rest is below any clock here"},
		{"2026-11-29T20:35:19.310+0000", "2026-11-29T20:35:19.31Z", "an offset without a colon (Java's SimpleDateFormat, some strftime)"},
		{"2026-11-29T21:35:19.310+01:00", "2026-11-29T20:35:19.31Z", "an offset with a colon"},
		{"2026-11-29T15:35:19-05", "2026-11-29T20:35:19Z", "an offset of hours only"},
		{"2026-11-29T15:35:19,5-0500", "2026-11-29T20:35:19.5Z", "a decimal comma, as ISO-8601 allows"},
		{"2026-11-29t20:35:19z", "2026-11-29T20:35:19Z", "lower-case t and z"},
		{"2026-11-29 20:35:19Z", "2026-11-29T20:35:19Z", "a space instead of T (RFC 3339 allows it)"},
		{"2026-11-29T20:35Z", "2026-11-29T20:35:00Z", "no seconds"},
		{"2026-11-29T20:30:38.123", "2026-11-29T20:30:38.123Z", "no zone: the contract says UTC"},
		{"2026-11-29T20:30:60Z", "2026-11-29T20:30:59.999999999Z", "a leap second"},
		{"2026-11-29T24:00:00Z", "2026-11-30T00:00:00Z", "24:00 is the end of the day"},
		{"", "", "nothing"},
		{"noon", "", "not a date"},
		{"2026-11-29", "", "a date without a time"},
		{"2026-13-01T00:00:00Z", "", "month 13"},
		{"2026-02-30T00:00:00Z", "", "30 February"},
		{"2026-11-29T20:30:38.Z", "", "a fraction without digits"},
		{"2026-11-29T20:30:38Z ", "", "trailing space"},
		{"2026-11-29T20:30:38+2400", "", "an offset past a day"},
		{"2026-11-29T20:30:38Zjunk", "", "trailing text"},
		{"1732912566", "", "epoch seconds are not ISO-8601"},
	} {
		got, err := isotime.Parse(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("Parse(%q) = %v; want an error (%s)", tc.in, got, tc.reason)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v (%s)", tc.in, err, tc.reason)
		} else if want := at(tc.want); !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("Parse(%q) = %v; want %v in UTC (%s)", tc.in, got, want, tc.reason)
		}
	}
}

// Whatever Parse accepts, time's own RFC 3339 reader agrees on when it
// accepts it too; and nothing panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"2026-11-29T20:30:38Z", "2026-11-29T20:35:19.310+0000", "2026-11-29T21:35:19+01:00", "2026-11-29t20:35z", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := isotime.Parse(s)
		if err != nil {
			return
		}
		if ref, rerr := time.Parse(time.RFC3339Nano, s); rerr == nil && !ref.Equal(got) {
			t.Errorf("Parse(%q) = %v, time.Parse = %v", s, got, ref)
		}
		if got.Year() < 0 || got.Year() > 10000 {
			t.Errorf("Parse(%q) = %v: out of any sane range", s, got)
		}
	})
}

func TestFormat(t *testing.T) {
	at := time.Date(2026, 11, 29, 21, 36, 6, 950_123_456, time.FixedZone("CET", 3600))
	if got, want := isotime.Format(at), "2026-11-29T20:36:06.950Z"; got != want {
		t.Errorf("Format = %q, want %q: UTC, milliseconds, as Node writes", got, want)
	}
	if got, want := isotime.Format(at.Truncate(time.Second)), "2026-11-29T20:36:06.000Z"; got != want {
		t.Errorf("Format = %q, want %q: always three digits", got, want)
	}
}
