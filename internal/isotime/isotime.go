// Package isotime reads the ISO-8601 instants the family's members write
// (startedIso, createdIso and the fates' times), in every precision and
// offset they or their platforms use, and writes them as rightsize-go does.
// It must never read an instant it cannot parse as another one: what it
// does not know is an error.
package isotime

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Parse reads an ISO-8601 date and time of day as the family's members
// and their platforms write them: YYYY-MM-DD, then 'T' (or 't', or one
// space), then hh:mm, optionally :ss and a fraction of any length (',' or
// '.'), then 'Z' (or 'z'), an offset as +hh:mm, +hhmm or +hh, or nothing,
// which is read as UTC. The result is in UTC.
func Parse(s string) (time.Time, error) {
	p := isoParser{s: s}
	year := p.digits(4, "year")
	p.lit('-')
	month := p.digits(2, "month")
	p.lit('-')
	day := p.digits(2, "day")
	if p.err == nil {
		if c, ok := p.peek(); ok && (c == 'T' || c == 't' || c == ' ') {
			p.i++
		} else {
			p.fail("want 'T' after the date")
		}
	}
	hour := p.digits(2, "hour")
	p.lit(':')
	minute := p.digits(2, "minute")
	var sec, nsec int
	if c, ok := p.peek(); ok && c == ':' && p.err == nil {
		p.i++
		sec = p.digits(2, "second")
		if c, ok := p.peek(); ok && (c == '.' || c == ',') && p.err == nil {
			p.i++
			n := 0
			for ; p.i < len(p.s) && isDigit(p.s[p.i]); p.i++ {
				if n < 9 {
					nsec = nsec*10 + int(p.s[p.i]-'0')
				}
				n++
			}
			if n == 0 {
				p.fail("a fraction with no digits")
			}
			for ; n < 9; n++ {
				nsec *= 10
			}
		}
	}
	offset := 0
	if c, ok := p.peek(); ok && p.err == nil {
		switch c {
		case 'Z', 'z':
			p.i++
		case '+', '-':
			p.i++
			oh := p.digits(2, "offset hours")
			om := 0
			if c, ok := p.peek(); ok && c == ':' {
				p.i++
				om = p.digits(2, "offset minutes")
			} else if ok && isDigit(c) {
				om = p.digits(2, "offset minutes")
			}
			if oh > 23 || om > 59 {
				p.fail("offset out of range")
			}
			offset = oh*3600 + om*60
			if c == '-' {
				offset = -offset
			}
		default:
			p.fail(fmt.Sprintf("unexpected %q", c))
		}
	}
	if p.err == nil && p.i != len(p.s) {
		p.fail("trailing text")
	}
	if p.err != nil {
		return time.Time{}, p.err
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 24 || minute > 59 || sec > 60 ||
		(hour == 24 && (minute != 0 || sec != 0 || nsec != 0)) {
		return time.Time{}, errors.New("a field is out of range")
	}
	if sec == 60 {
		sec = 59 // a leap second: the instant before it is close enough
		nsec = 999_999_999
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.FixedZone("", offset))
	return t.UTC(), nil
}

type isoParser struct {
	s   string
	i   int
	err error
}

func (p *isoParser) fail(why string) {
	if p.err == nil {
		p.err = fmt.Errorf("at byte %d: %s", p.i, why)
	}
}

func (p *isoParser) peek() (byte, bool) {
	if p.i < len(p.s) {
		return p.s[p.i], true
	}
	return 0, false
}

func (p *isoParser) lit(c byte) {
	if p.err != nil {
		return
	}
	if got, ok := p.peek(); !ok || got != c {
		p.fail(fmt.Sprintf("want %q", c))
		return
	}
	p.i++
}

func (p *isoParser) digits(n int, what string) int {
	if p.err != nil {
		return 0
	}
	v := 0
	for k := 0; k < n; k++ {
		if p.i >= len(p.s) || !isDigit(p.s[p.i]) {
			p.fail("want " + strconv.Itoa(n) + " digits of the " + what)
			return 0
		}
		v = v*10 + int(p.s[p.i]-'0')
		p.i++
	}
	return v
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func daysIn(year, month int) int {
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// Format formats t as rightsize-go writes an instant (startedIso and
// the others): UTC, milliseconds.
func Format(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}
