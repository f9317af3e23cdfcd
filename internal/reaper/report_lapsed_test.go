package reaper_test

import (
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/reaper"
)

func TestReportTellsLapsedClaims(t *testing.T) {
	quiet := &reaper.Report{Backend: "kubernetes"}
	if quiet.Acted() || !quiet.Clean() {
		t.Fatalf("a sweep that did nothing: acted %v, clean %v", quiet.Acted(), quiet.Clean())
	}
	for _, c := range []struct {
		r     reaper.Report
		want  string
		clean bool
	}{
		{reaper.Report{Lapsed: []string{"0a1b2c3d", "0a1b2c3e"}}, "lapsed run claims dropped (the engine removes what they own): 0a1b2c3d, 0a1b2c3e\n", true},
		{reaper.Report{Lapsed: []string{"0a1b2c3d"}, DryRun: true}, "lapsed run claims would be dropped", true},
		{reaper.Report{LapseProblem: "list Leases: forbidden\x1b[2J"}, "! lapsed run claims: list Leases: forbidden", false},
	} {
		var b strings.Builder
		if _, err := c.r.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) || strings.Contains(b.String(), "\x1b") {
			t.Errorf("report %+v says:\n%s\nwant %q, and no escape", c.r, b.String(), c.want)
		}
		if !c.r.Acted() || c.r.Clean() != c.clean {
			t.Errorf("report %+v: acted %v, clean %v (want clean %v)", c.r, c.r.Acted(), c.r.Clean(), c.clean)
		}
	}
}
