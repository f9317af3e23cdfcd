package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

func TestFormatAge(t *testing.T) {
	cases := []struct {
		age  time.Duration
		want string
	}{
		{0, "0s"},
		{59*time.Second + 999*time.Millisecond, "59s"},
		{5*time.Minute + 7*time.Second, "5m07s"},
		{3*time.Hour + 12*time.Minute + 5*time.Second, "3h12m"},
		{2*24*time.Hour + 4*time.Hour + 59*time.Minute, "2d04h"},
	}
	for _, c := range cases {
		if got := formatAge(lsRun{Modified: "x", age: c.age}); got != c.want {
			t.Errorf("formatAge(%s) = %q, want %q", c.age, got, c.want)
		}
	}
	if got := formatAge(lsRun{}); got != "-" {
		t.Errorf("formatAge with no modification time = %q, want -", got)
	}
}

// TestTable: the table ls prints aligns as the tabwriter it replaces did,
// without a trailing blank.
func TestTable(t *testing.T) {
	rows := [][]string{
		{"RUN", "STATUS", "AGE", "REASON"},
		{"rz-1", "\x1b[32malive\x1b[0m", "5m07s", "pid 42 started 2026-11-29T20:30:38Z"},
		{"café-✓", "dead", "2d04h", "a last cell\twith a tab"},
		{"x", "", "-", ""},
	}
	var want bytes.Buffer
	tw := tabwriter.NewWriter(&want, 0, 4, 2, ' ', 0)
	tb := &table{}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
		tb.row(r...)
	}
	tw.Flush()
	var got bytes.Buffer
	if err := tb.write(&got); err != nil {
		t.Fatal(err)
	}
	// tabwriter aligns the tab of the last cell as a column of its own,
	// and pads before an empty last cell: compare the other rows, trimmed.
	wl, gl := strings.Split(want.String(), "\n"), strings.Split(got.String(), "\n")
	for _, i := range []int{0, 1, 3} {
		if w := strings.TrimRight(wl[i], " "); gl[i] != w {
			t.Errorf("row %d:\n got %q\nwant %q", i, gl[i], w)
		}
	}
	// STATUS is as wide as its coloured cell, escapes counted (14), plus 2.
	if want := "café-✓  dead" + strings.Repeat(" ", 12) + "2d04h  a last cell\twith a tab"; gl[2] != want {
		t.Errorf("row 2:\n got %q\nwant %q", gl[2], want)
	}
	if tb.len() != 4 {
		t.Errorf("len = %d, want 4", tb.len())
	}
}

func TestFormatPorts(t *testing.T) {
	cases := []struct {
		tcp, udp map[string]int
		want     string
	}{
		{nil, nil, "-"},
		{map[string]int{"8080": 32801, "443": 32802}, nil, "443->32802,8080->32801"},
		{map[string]int{"5432": 1}, map[string]int{"53": 2}, "5432->1,53/udp->2"},
	}
	for _, c := range cases {
		if got := formatPorts(c.tcp, c.udp); got != c.want {
			t.Errorf("formatPorts(%v, %v) = %q, want %q", c.tcp, c.udp, got, c.want)
		}
	}
}
