package proctree_test

import (
	"testing"

	"github.com/rightsize/rightsize-go/internal/proctree"
)

// OfRun takes exactly the marks of its run's commands: not those of a run
// whose id starts with it and a ".p" (ids of other members may hold dots).
func TestOfRunExact(t *testing.T) {
	of := proctree.OfRun("abc")
	for mark, want := range map[string]bool{
		proctree.Mark("abc", proctree.Line(1, 42)): true,
		"abc.p12.7":   true,
		"abc.p1.p2.3": false, // a mark of run "abc.p1"
		"abc.p1":      false,
		"abc.p.3":     false,
		"abc.px.3":    false,
		"abc.p1.":     false,
		"abc.p1.3/x":  false,
		"abcd.p1.3":   false,
		"abc.p1.3 ":   false,
		"xabc.p1.3":   false,
		"abc.p1.3.4":  false,
		"abc.p１.3":    false, // a full-width digit
		"":            false,
	} {
		if got := of(mark); got != want {
			t.Errorf("OfRun(abc)(%q) = %v, want %v", mark, got, want)
		}
	}
}
