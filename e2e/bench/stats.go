//go:build linux

package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// ms prints d in whole milliseconds; ms1 with one decimal. An empty
// figure prints as n/a.
func ms(d time.Duration) string { return msN(d, 0) }

func ms1(d time.Duration) string { return msN(d, 1) }

func msN(d time.Duration, prec int) string {
	if d == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', prec, 64) + "ms"
}

// loadavg is /proc/loadavg's three averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// load1 is the 1-minute load average (-1 when unknown).
func load1() float64 {
	f := strings.Fields(loadavg())
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
