package backend

import (
	"strings"
	"testing"
)

func TestNotOwnedWhy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string // "" owned, "-" unlabelled, else a fragment of why not
	}{
		{"rz-r-1", RunLabels("r"), ""},
		{"rz-r-1", map[string]string{LabelRunIDAlt: "r"}, ""},
		{"rz-r-1", map[string]string{LabelRunID: "x", LabelRunIDAlt: "r"}, ""},
		{"rz-r-1", RunLabels("x"), "labelled for run x"},
		{"rz-r-1", map[string]string{LabelRunID: ""}, "labelled for run"},
		{"rz-r-1", nil, "-"},
		{"rz-r-1", map[string]string{"other": "r"}, "-"},
		{"rz-reuse-0123456789ab", RunLabels("r"), "named as a keep-alive"},
		{"rz-r-1", map[string]string{LabelReuse: "h", LabelRunID: "r"}, "a keep-alive sandbox (dev.rightsize.reuse=h)"},
	} {
		got := NotOwnedWhy("r", tc.name, tc.labels)
		switch tc.want {
		case "", "-":
			if want := map[string]string{"": "", "-": UnlabelledWhy}[tc.want]; got != want {
				t.Errorf("%s %v: %q, want %q", tc.name, tc.labels, got, want)
			}
		default:
			if got == "" || got == UnlabelledWhy || !strings.Contains(got, tc.want) {
				t.Errorf("%s %v: %q, want it to say %q", tc.name, tc.labels, got, tc.want)
			}
		}
	}
}
